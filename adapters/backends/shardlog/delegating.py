"""A Shard Log in front of another: every call goes to ``inner`` unless a subclass
overrides it (a diverged shard's log that refuses appends; the tests' fault doubles)."""

from __future__ import annotations

from collections.abc import Sequence

from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt, ShardLog


class DelegatingLog:
    """A real Shard Log behind a seam: every call goes to ``inner`` unless overridden."""

    def __init__(self, inner: ShardLog) -> None:
        self.inner = inner
        self.dense = inner.dense

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        return self.inner.append(payloads)

    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        return self.inner.read(from_position, max_records)

    def end_position(self) -> int:
        return self.inner.end_position()

    def ack(self, position: int) -> None:
        self.inner.ack(position)

    def close(self) -> None:
        self.inner.close()
