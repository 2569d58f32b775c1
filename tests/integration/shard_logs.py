"""A test's hands on Shard Logs, whatever their backend: a log per shard opened when first
needed and all closed together, a log read back whole, and the check that a shard's store
applied exactly the records its log holds.

``ShardLogs`` is what ``nereus.client.queue`` wants as ``log_for``, so a test queues its
commands as a client does (one group append per shard).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import decode_int


class ShardLogs:
    """The logs of one route's shards, each opened by ``open_log`` on first use."""

    def __init__(self, open_log: Callable[[ShardId], ShardLog]) -> None:
        self._open_log = open_log
        self._logs: dict[ShardId, ShardLog] = {}

    def __call__(self, shard: ShardId) -> ShardLog:
        if shard not in self._logs:
            self._logs[shard] = self._open_log(shard)
        return self._logs[shard]

    def close(self) -> None:
        for log in self._logs.values():
            log.close()

    def __enter__(self) -> ShardLogs:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def read_records(log: ShardLog, end: int, where: object) -> Iterator[tuple[int, bytes]]:
    """(position, payload) of every record before ``end``; ``where`` names the log when a
    position below the end cannot be read."""
    position = 0
    while position < end:
        records = log.read(position, 5_000)
        assert records, f"{where}: nothing readable at {position} (end {end})"
        for record in records:
            yield record.position, record.payload
        position = records[-1].position + 1


def check_applied_to_end(store: ShardStore, end: int, where: object) -> None:
    """The store applied every record of a log whose end is ``end``, each once: its records
    counter is the end and its applied position the last record."""
    raw = store.get(keys.META_RECORDS)
    assert raw is not None and decode_int(raw) == end, (
        f"{where}: records applied {raw and decode_int(raw)} != log end {end}")
    assert store.applied_position() == end - 1
