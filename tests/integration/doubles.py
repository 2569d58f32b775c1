"""Test doubles for the engine's seams: a Shard Log that delegates to a real one (tests
override what they disturb), and a destination base with nothing to probe or scan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nereus.adapters.shardlog.protocol import LogRecord, Receipt, ShardLog


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


class QuietDestination:
    """A destination with nothing to probe, no evidence to find and nothing to close;
    subclasses say how ``publish`` behaves."""

    name = "local"
    max_record_bytes: int | None = None

    def probe(self) -> str | None:
        return None

    def scan_evidence(self, wanted: Mapping[str, str], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass
