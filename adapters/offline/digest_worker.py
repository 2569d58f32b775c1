"""``python -m nereus.adapters.offline.digest_worker DIR [--version 1 | --range LO HI]``: digest the
database at DIR.

Verification runs the digest here, in child processes, so that the key-ordered scans
(which hold the GIL the whole time) and the SHA-256 of the checkpoint's files (threads in
the parent) really use every core instead of taking turns on one interpreter lock.

* ``--range LO HI`` (hex keys, cut at leaf boundaries): the v2 leaf digests of the keys in
  ``[LO, HI)``, written to stdout as one MessagePack array of ``[leaf, digest]``; the
  parent combines the ranges (``nereus.state.digest.combine``);
* ``--version 1``: the whole v1 digest, pipelined, as one hex line (a format 1 checkpoint);
* neither: the whole v2 digest as one hex line.

The child opens the database read-only with its tables mapped (``ShardStore.open``'s
``mapped``: no copy of every block into the process; if a file is truncated under it the
child dies of SIGBUS, and the parent falls back as for any failure). Any failure is a
non-zero exit with the reason on stderr, and the parent then computes the digest itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

USAGE = "usage: python -m nereus.adapters.offline.digest_worker DIR [--version 1 | --range LO HI]"


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 3, 4) or (len(argv) > 1 and argv[1] not in ("--version", "--range")):
        print(USAGE, file=sys.stderr)
        return 2
    import msgspec

    from nereus.errors import NereusError
    from nereus.state.digest import combine, leaf_digests
    from nereus.state.store import ShardStore

    try:
        with ShardStore.open(Path(argv[0]), read_only=True, mapped=True) as store:
            if len(argv) == 4:
                lo, hi = bytes.fromhex(argv[2]), bytes.fromhex(argv[3])
                # verify checks every file's checksum beside this: RocksDB's per-block
                # checksums would only check the same bytes twice
                leaves = list(leaf_digests(store.replicated(lo, hi, verify_checksums=False)))
                sys.stdout.buffer.write(msgspec.msgpack.encode(leaves))
            elif len(argv) == 3 and argv[2] == "1":
                from nereus.adapters.offline.parallel_verify import pipelined_digest

                # The scan thread holds the GIL almost all the time; the hashing thread
                # needs it for a moment per chunk. A short switch interval hands it over
                # sooner; this process does nothing else, so nothing else pays for it.
                sys.setswitchinterval(0.0001)
                print(pipelined_digest(store))
            elif len(argv) == 1 or argv[2] == "2":
                print(combine(leaf_digests(store.replicated())))
            else:
                print(f"state digest version {argv[2]} is not known", file=sys.stderr)
                return 2
    except (NereusError, ValueError) as exc:
        print(getattr(exc, "message", str(exc)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
