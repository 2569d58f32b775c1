"""An engine whose file lane writes half of its first publish and then hangs, to be SIGKILLed.

Run by ``test_fenced_outbox.py`` as ``python outbox_crash_worker.py HOME COUNT``. It
schedules COUNT messages due now on a one-shard home (file lane ``local``), waits until
every one is admitted (PUBLISHING), prints ``ready <lines written>`` and waits to be
killed: the written attempts' answers never came back, the others never left the
publisher, and no outcome of either is in the Shard Log.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))

from nereus.adapters.backends.destination.file_outbox import FileDestination
from nereus.adapters.backends.destination.protocol import (
    PublishRequest,
    PublishResult,
)
from nereus.state import keys
from nereus.state.values import Obligation, decode_value
from tests.integration import engine_harness

# named running_engine before the harness's rename (issue 39), in_process_engine after
in_process_engine = next(getattr(engine_harness, name) for name in
                         ("in_process_engine", "running_engine") if hasattr(engine_harness, name))
now_ms = engine_harness.now_ms


class HangsAfterHalf(FileDestination):
    """Writes the first half of its first publish (under the shard's writer lock), then
    never returns."""

    written = threading.Event()
    count = 0

    def publish(self, requests: Sequence[PublishRequest],
                now: Callable[[], int]) -> list[PublishResult]:
        half = list(requests[:(len(requests) + 1) // 2])
        super().publish(half, now)
        HangsAfterHalf.count = len(half)
        HangsAfterHalf.written.set()
        threading.Event().wait()  # the answer never comes back
        return []


def main(argv: list[str]) -> int:
    home, count = Path(argv[1]), int(argv[2])
    lane = HangsAfterHalf("local", home / "outbox" / "local.jsonl")
    with in_process_engine(home, partitions=1, destinations={"local": lane}) as h:
        due = now_ms()
        h.queue([h.schedule(f"m{n}", due) for n in range(count)])
        store = h.engine.shards[next(iter(h.engine.shards))].store
        while True:  # bounded by the test, which kills this process
            publishing = [decode_value(raw, Obligation) for _, raw in
                          store.scan_prefix(keys.OBLIGATION)]
            if len(publishing) == count and HangsAfterHalf.written.is_set():
                break
            time.sleep(0.05)
        print("ready", HangsAfterHalf.count, flush=True)
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
