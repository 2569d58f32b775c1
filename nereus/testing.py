"""Test helpers for users and for our own tests: an in-memory shard.

``MemoryShard`` applies records with the real ``apply`` into a dict instead of RocksDB,
so state-machine behaviour can be tested (and property-tested) without disk I/O. Its
digest is computed exactly like a RocksDB shard's.
"""

from __future__ import annotations

from collections.abc import Iterator

from nereus.machine import DEFAULT_LIMITS, Applied, Limits, apply
from nereus.records import Record, encode
from nereus.state import keys
from nereus.state.digest import digest_pairs
from nereus.state.store import identity_writes
from nereus.state.values import Attempt, Identity, Lane, Message, Result, decode_value


class MemoryShard:
    """A Delay Shard whose state lives in a dict; positions count from 0."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS, identity: Identity | None = None) -> None:
        self.data: dict[bytes, bytes] = {}
        if identity is not None:
            self.data.update(
                (k, v) for k, v in identity_writes(identity).items() if v is not None
            )
        self.limits = limits
        self.next_position = 0

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def keys_under(self, prefix: bytes) -> Iterator[bytes]:
        """The keys under ``prefix`` in key order."""
        return iter(self.keys_with_prefix(prefix))

    def apply(self, record: bytes | Record, *, broker_ms: int = 0) -> Applied:
        """Apply one record at the next position and commit its writes."""
        data = record if isinstance(record, bytes) else encode(record)
        applied = apply(self, data, position=self.next_position, broker_ms=broker_ms,
                        limits=self.limits)
        for key, value in applied.writes.items():
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value
        self.next_position += 1
        return applied

    def result(self, record: bytes | Record, *, broker_ms: int = 0) -> Result:
        return self.apply(record, broker_ms=broker_ms).result

    def digest(self) -> str:
        return digest_pairs(self.data.items())

    def message(self, delay_message_id: str) -> Message | None:
        raw = self.data.get(keys.msg_key(delay_message_id))
        return None if raw is None else decode_value(raw, Message)

    def attempt(self, attempt_id: str) -> Attempt | None:
        raw = self.data.get(keys.attempt_key(attempt_id))
        return None if raw is None else decode_value(raw, Attempt)

    def lane(self, name: str) -> Lane | None:
        raw = self.data.get(keys.lane_key(name))
        return None if raw is None else decode_value(raw, Lane)

    def keys_with_prefix(self, prefix: bytes) -> list[bytes]:
        return sorted(k for k in self.data if k.startswith(prefix))
