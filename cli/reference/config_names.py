"""Lane, route and shard names for the completion scripts, read from the home's
``nereus.toml`` by the shell itself: an awk program over the file's table headers and each
route's ``partitions`` (1 when unset), so pressing TAB still never starts Python or the
engine. The home is the line's ``--home``, else ``$NEREUS_HOME``, else ``./.nereus``, as
for the CLI. A node of a cluster keeps its routes and lanes in the coordinator: its file
names none, and none are offered.
"""

from __future__ import annotations

from typing import Final

KINDS: Final = ("lane", "route", "shard")

# awk -v kind=lane|route|shard -f- nereus.toml; POSIX awk (mawk and gawk alike)
AWK: Final = (
    '/^[ \\t]*\\[lanes\\.[^]]*\\]/ { n = $0; sub(/^[ \\t]*\\[lanes\\./, "", n); '
    'sub(/\\].*/, "", n); gsub(/"/, "", n); if (kind == "lane") print n; r = ""; next } '
    '/^[ \\t]*\\[routes\\.[^]]*\\]/ { r = $0; sub(/^[ \\t]*\\[routes\\./, "", r); '
    'sub(/\\].*/, "", r); gsub(/"/, "", r); if (kind == "route") print r; parts[r] = 1; '
    'next } '
    '/^[ \\t]*\\[/ { r = ""; next } '
    'r != "" && /^[ \\t]*partitions[ \\t]*=/ { v = $0; sub(/^[^=]*=[ \\t]*/, "", v); '
    'sub(/[^0-9].*$/, "", v); if (v != "") parts[r] = v + 0 } '
    'END { if (kind == "shard") for (r in parts) for (p = 0; p < parts[r]; p++) '
    'print r "/" p }'
)
