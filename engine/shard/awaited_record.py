"""A record of this owner's on its way to the Shard Log (a SWEEP, a RETAIN_BACKFILL): the
next one waits until it is applied, or until ``give_up_s`` passes (its append may have been
lost), so one owner never has two of a kind in flight."""

from __future__ import annotations

from typing import Generic, TypeVar

from nereus.state import keys
from nereus.state.store import ShardStore

T = TypeVar("T")


class AwaitedRecord(Generic[T]):
    def __init__(self, store: ShardStore, give_up_s: float) -> None:
        self._store = store
        self._give_up_s = give_up_s
        # (mutation id, when appended, what the appender keeps with it)
        self._on_way: tuple[str, float, T] | None = None

    def appended(self, mutation_id: str, mono: float, kept: T) -> None:
        self._on_way = (mutation_id, mono, kept)

    def settle(self, mono: float) -> tuple[bool, T | None]:
        """(whether a record is still on its way, what was kept with one given up on)."""
        if self._on_way is None:
            return False, None
        mutation_id, since, kept = self._on_way
        applied = self._store.get(keys.result_key("s/" + mutation_id)) is not None
        if not applied and mono - since < self._give_up_s:
            return True, None
        self._on_way = None
        return False, None if applied else kept
