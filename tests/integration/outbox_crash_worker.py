"""An engine whose lane sends half of its first publish and then hangs, to be SIGKILLed.

Run by ``test_fenced_outbox.py`` (and ``bench/evidence.py``) as ``python
outbox_crash_worker.py HOME COUNT [LANE_TOML [load]]``. It schedules COUNT messages due now on a
one-shard home whose lane ``local`` is LANE_TOML's table (default: a file lane), waits
until every one is admitted (PUBLISHING), prints ``ready <records sent>`` and waits to be
killed: the sent attempts' answers never came back, the others never left the publisher,
and no outcome of either is in the Shard Log.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))

from nereus.adapters.backends.destination.factory import open_destination
from nereus.adapters.backends.destination.protocol import (
    Destination,
    PublishRequest,
    PublishResult,
)
from nereus.config import parse_config
from nereus.state import keys
from nereus.state.values import Obligation, decode_value
from tests.integration import engine_harness
from tests.integration.engine_harness import in_process_engine
from tests.polling import wait_until

WAIT_S = 600.0  # the test (or bench) that started this process kills it long before

now_ms = engine_harness.now_ms


class Sent:
    """What the hanging publish sent before it hung."""

    done = threading.Event()
    count = 0


def hangs_after_half(destination: Destination) -> Destination:
    """``destination``, whose first publish sends the first half of its requests (through
    the adapter's own publish: under its fence) and then never returns."""
    adapter = type(destination)

    def publish(self: Destination, requests: Sequence[PublishRequest],
                now: Callable[[], int]) -> list[PublishResult]:
        half = list(requests[:(len(requests) + 1) // 2])
        adapter.publish(self, half, now)
        Sent.count = len(half)
        Sent.done.set()
        threading.Event().wait()  # the answer never comes back
        return []

    destination.__class__ = type(f"HangsAfterHalf{adapter.__name__}", (adapter,),
                                 {"publish": publish})
    return destination


def main(argv: list[str]) -> int:
    home, count = Path(argv[1]), int(argv[2])
    text = argv[3] if len(argv) > 3 else engine_harness.file_lane("local", "outbox/local.jsonl")
    lane = parse_config(f'[routes.default]\nlog = "file"\npartitions = 1\n{text}',
                        source="lane").lanes["local"]
    if argv[4:5] == ["load"]:
        return under_load(home, count, text)
    hanging = hangs_after_half(open_destination(lane, home))
    with in_process_engine(home, partitions=1, lanes=text,
                           destinations={"local": hanging}) as h:
        due = now_ms()
        h.queue([h.schedule(f"m{n}", due) for n in range(count)])
        store = h.engine.shards[next(iter(h.engine.shards))].store

        def all_publishing() -> bool:
            publishing = [decode_value(raw, Obligation) for _, raw in
                          store.scan_prefix(keys.OBLIGATION)]
            return len(publishing) == count and Sent.done.is_set()

        # the test kills this process well before the deadline
        wait_until("every attempt PUBLISHING, half of them sent", all_publishing, WAIT_S,
                   interval_s=0.05)
        print("ready", Sent.count, flush=True)
        threading.Event().wait()
    return 0


def under_load(home: Path, count: int, text: str) -> int:
    """``load`` (``bench/evidence.py``): COUNT messages due now on the real lane, and
    ``ready <published>`` once a third of them are published; then wait to be killed,
    mid-burst, with whatever is in flight then."""
    with in_process_engine(home, partitions=1, lanes=text) as h:
        due = now_ms()
        for start in range(0, count, 5_000):
            h.queue([h.schedule(f"m{n}", due) for n in range(start, min(count, start + 5_000))])
        publisher = h.engine.publishers["local"]
        wait_until("a third published", lambda: publisher.published >= count // 3, WAIT_S,
                   interval_s=0.01)  # the caller kills this process well before the deadline
        print("ready", publisher.published, flush=True)
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
