"""``python -m nereus.adapters.offline.digest_worker DIR [--version 1 | --range LO HI]``:
digest the database at DIR in a child process, so the key-ordered scans (which hold the GIL
throughout) and the parent's file hashing use every core.

``--range LO HI`` (hex keys at leaf boundaries) writes the v2 leaf digests of ``[LO, HI)``
to stdout as one MessagePack array of ``[leaf, digest]`` for the parent to combine
(``nereus.state.digest.combine``); ``--version 1`` the whole v1 digest; neither the whole v2
digest, as hex. The database is opened read-only with its tables mapped; a table truncated
under the mapping kills the child with SIGBUS. Any failure is a non-zero exit with the
reason on stderr, and the parent computes the digest itself.
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
