"""The shard runner: consume -> apply -> ONE synced WriteBatch -> acknowledge.

Group commit is where throughput comes from: a batch of records is applied into an
in-memory overlay (each record sees the earlier ones' writes), then every result, state
change and the applied position are committed in one WriteBatch with sync, and only then
is the source acknowledged. A crash before the commit loses nothing (the records are
re-read from the log); a crash after it re-reads nothing (the applied position moved in
the same batch). Re-delivery of an applied record is a no-op by deduplication.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nereus.adapters.backends.shardlog.protocol import LogRecord, ShardLog
from nereus.errors import LogCorruption
from nereus.machine import Applied, apply
from nereus.state.store import ShardStore
from nereus.state.view import Overlay

AppliedObserver = Callable[[LogRecord, Applied], None]


@dataclass(frozen=True, slots=True)
class BatchReport:
    records: int
    first_position: int | None
    last_position: int | None


class ShardRunner:
    """Applies one shard's log into its store, in batches."""

    def __init__(
        self,
        store: ShardStore,
        log: ShardLog,
        *,
        batch_records: int = 2_000,
        observer: AppliedObserver | None = None,
    ) -> None:
        self.store = store
        self.log = log
        self.batch_records = batch_records
        self.observer = observer
        applied = store.applied_position()
        self.next_position = 0 if applied is None else applied + 1
        self.dense = bool(getattr(log, "dense", True))

    def step(self, *, stop_at: int | None = None) -> BatchReport:
        """Apply the next batch (up to ``stop_at`` inclusive); returns what was applied."""
        limit = self.batch_records
        if stop_at is not None:
            limit = min(limit, stop_at - self.next_position + 1)
            if limit <= 0:
                return BatchReport(0, None, None)
        records = self.log.read(self.next_position, limit)
        if stop_at is not None and records and records[-1].position > stop_at:
            records = [r for r in records if r.position <= stop_at]  # sparse positions
        if not records:
            return BatchReport(0, None, None)
        overlay = Overlay(self.store)
        merge, dense, observer = overlay.merge, self.dense, self.observer
        expected = self.next_position
        for record in records:
            position = record.position
            if position != expected and (dense or position < expected):
                raise LogCorruption(
                    f"the log returned position {position} where {expected} was next",
                    path=str(getattr(self.log, "directory", "shard log")), offset=expected,
                )
            applied = apply(overlay, record.payload, position=position,
                            broker_ms=record.broker_ms)
            merge(applied.writes)
            if observer is not None:
                observer(record, applied)
            expected = position + 1
        self.store.write(overlay.finish())
        self.next_position = expected
        self.log.ack(expected - 1)
        return BatchReport(len(records), records[0].position, records[-1].position)

    def run_until_caught_up(
        self,
        *,
        stop_at: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Apply batches until the log has nothing more (or ``stop_at`` is applied)."""
        total = 0
        while True:
            report = self.step(stop_at=stop_at)
            if not report.records:
                return total
            total += report.records
            if progress is not None:
                progress(report.records)
