"""``python -m nereus.adapters.digest_worker DIR``: print the state digest of the database at DIR.

Verification runs the digest here, in a child process, so that its key-ordered scan (which
holds the GIL the whole time) and the SHA-256 of the checkpoint's files (threads in the
parent) really use two cores instead of taking turns on one interpreter lock. The child
opens the database read-only and runs the same pipelined digest the parent would; its one
line of output is the hex digest. Any failure is a non-zero exit with the reason on
stderr, and the parent then computes the digest itself.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m nereus.adapters.digest_worker DIR", file=sys.stderr)
        return 2
    from nereus.adapters.parallel_verify import pipelined_digest
    from nereus.errors import NereusError
    from nereus.state.store import ShardStore

    # The scan thread holds the GIL almost all the time; the hashing thread needs it for
    # a moment per chunk. A short switch interval hands it over sooner (about 10% faster
    # here); this process does nothing else, so nothing else pays for it.
    sys.setswitchinterval(0.0001)
    try:
        with ShardStore.open(Path(argv[0]), read_only=True) as store:
            print(pipelined_digest(store))
    except NereusError as exc:
        print(exc.message, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
