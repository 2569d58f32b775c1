"""Characters that print as nothing, or as a plain space: an id holding one looks like
another id (``"a\\u200bb"`` prints as ``ab``), so ids may not hold them
(``nereus.machine.validate.check_id``).

The set is a fixed table, not ``unicodedata``: ``apply`` refuses such ids and must decide
the same on every Python (whose Unicode version changes), or a replay would differ from the
live shard. It is, as of Unicode 15.1, the format characters (Cf), every space separator
but U+0020 (Zs) and the line and paragraph separators (Zl, Zp), the default-ignorable code
points, and U+2800 BRAILLE PATTERN BLANK. Control characters and bidi overrides are
``nereus.terminal_text``'s (callers check controls first). Changing the table changes what
apply accepts: add to it only with a note in ``docs/rules.md``.
"""

from __future__ import annotations

import re
from typing import Final

_INVISIBLE: Final = re.compile(
    "[\u00a0\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u1680\u17b4\u17b5\u180b-\u180f\u2000-\u200f\u2028-\u202f\u205f-\u206f\u2800\u3000"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def find_invisible(text: str) -> int | None:
    """The index of the first character of ``text`` that prints as nothing or as a plain
    space (any space but U+0020), or None."""
    found = _INVISIBLE.search(text)
    return None if found is None else found.start()
