"""Apply a file Shard Log into a shard database until caught up, to be SIGKILLed.

Run by ``test_crash_apply.py`` as ``python crash_worker.py LOG_DIR DB_DIR BATCH_RECORDS``.
It prints one line per event and flushes it, so the test can time its kills without
sleeping blindly:

* ``open <applied position or -1> <records applied>`` once the database is open, before
  anything is applied (what the previous, killed, run left behind);
* ``batch <records>`` after each committed batch;
* ``done <records>`` once caught up.
"""

from __future__ import annotations

import sys
from pathlib import Path

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity, decode_int


def main(argv: list[str]) -> int:
    log_dir, db_dir, batch_records = Path(argv[1]), Path(argv[2]), int(argv[3])
    identity = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
    log = FileShardLog(log_dir, create=False)
    with ShardStore.open(db_dir, identity=identity, create=True) as store:
        applied = store.applied_position()
        raw = store.get(keys.META_RECORDS)
        records = 0 if raw is None else decode_int(raw)
        print("open", -1 if applied is None else applied, records, flush=True)
        runner = ShardRunner(store, log, batch_records=batch_records)
        total = runner.run_until_caught_up(
            progress=lambda n: print("batch", n, flush=True)
        )
        print("done", total, flush=True)
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
