"""The payload collection's metrics (``engine/metrics/payload_gc_families.py``): rounds, failed
rounds, objects and bytes deleted and the last success, read from the collector's own
counters, and merged over processes by the front door (summed; the latest success)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.adapters.backends.objectstore.protocol import ObjectInfo
from nereus.config import parse_config
from nereus.engine.metrics.collect import exposition_of
from nereus.engine.metrics.exposition_merge import merge
from nereus.engine.metrics.payload_gc_families import payload_gc_families
from nereus.engine.process.payload_collector import PayloadCollector
from nereus.layout import HomeLayout
from tests.fake_clock import FakeClock
from tests.polling import wait_until

CONFIG = """
[routes.default]
log = "file"
partitions = 1

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"
"""


class DownThenUp(LocalObjectStore):
    """A local store whose listing fails while ``down`` is set."""

    down = True

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        if self.down:
            raise ConnectionError("object store unreachable")
        return super().list(prefix)


def _samples(text: str) -> dict[str, float]:
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples}


def test_a_failed_round_and_a_deleting_one_are_counted(tmp_path: Path) -> None:
    """Every 60 s of the clock: the first round finds the store down (one failure, no
    success yet), the second deletes the 5-byte stray object (one round, one object, five
    bytes, its end as the last success)."""
    objects = DownThenUp(tmp_path / "objects")
    objects.put_bytes("payloads/default/0/stray", b"stray")
    clock = FakeClock(wall_ms=1_800_000_000_000)
    collector = PayloadCollector(parse_config(CONFIG), HomeLayout(tmp_path), objects,
                                 interval_s=60, clock=clock)
    worker = threading.Thread(target=collector.run, name="payload-gc-test")
    worker.start()
    try:
        wait_until("the collector waiting", lambda: clock.waiters == 1, 10)
        clock.advance(60)
        wait_until("a failed round", lambda: collector.failures == 1, 10)
        before = _samples(exposition_of(payload_gc_families(collector)))
        objects.down = False
        wait_until("the collector waiting again", lambda: clock.waiters == 1, 10)
        clock.advance(60)
        wait_until("a round to the end", lambda: collector.rounds == 1, 10)
    finally:
        collector.stop()
        worker.join(10)
    assert before["nereus_payload_gc_failures_total"] == 1
    assert before["nereus_payload_gc_rounds_total"] == 0
    assert before["nereus_payload_gc_last_success_timestamp_seconds"] == 0
    after = _samples(exposition_of(payload_gc_families(collector)))
    assert after == {
        "nereus_payload_gc_rounds_total": 1, "nereus_payload_gc_failures_total": 1,
        "nereus_payload_gc_deleted_objects_total": 1,
        "nereus_payload_gc_deleted_bytes_total": 5,
        "nereus_payload_gc_last_success_timestamp_seconds": 1_800_000_120.0}
    assert not list(objects.list("payloads/"))


def test_the_front_door_sums_the_counts_and_keeps_the_latest_success() -> None:
    """Two workers' collections (a node of a cluster run with --workers 2): rounds and
    deletions are summed, the last success is the latest of the two."""
    def worker(rounds: int, deleted: int, last_s: float) -> str:
        return ("# TYPE nereus_payload_gc_rounds counter\n"
                f"nereus_payload_gc_rounds_total {rounds}\n"
                "# TYPE nereus_payload_gc_deleted_objects counter\n"
                f"nereus_payload_gc_deleted_objects_total {deleted}\n"
                "# TYPE nereus_payload_gc_last_success_timestamp_seconds gauge\n"
                f"nereus_payload_gc_last_success_timestamp_seconds {last_s}\n")
    merged = _samples(merge([("worker-0", worker(3, 2, 1_800_000_000.0)),
                             ("worker-1", worker(4, 5, 1_800_000_600.0))]))
    assert merged["nereus_payload_gc_rounds_total"] == 7
    assert merged["nereus_payload_gc_deleted_objects_total"] == 7
    assert merged["nereus_payload_gc_last_success_timestamp_seconds"] == 1_800_000_600.0
