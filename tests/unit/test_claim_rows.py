"""A shard loop's local claim rows: written together, once per turn, never one by one."""

from __future__ import annotations

from collections.abc import Mapping

from nereus.engine.scheduler.claims import LocalRows


class Recording:
    """A store that keeps every WriteBatch it is given, and whether it was synced."""

    def __init__(self) -> None:
        self.batches: list[tuple[dict[bytes, bytes | None], bool]] = []

    def write(self, writes: Mapping[bytes, bytes | None], *, sync: bool = True) -> None:
        self.batches.append((dict(writes), sync))


def test_released_rows_wait_for_one_unsynced_write() -> None:
    """Three released claims' deletes and the planner's state go in ONE unsynced batch, and
    nothing is written before ``write``; a second ``write`` with nothing waiting writes
    nothing."""
    store = Recording()
    rows = LocalRows(store)
    for key in (b"\x81a", b"\x81b", b"\x81c"):
        rows.put(key, None)
    rows.put(b"\x82state", b"s1")
    assert store.batches == [] and len(rows) == 4
    rows.write()
    rows.write()
    assert store.batches == [({b"\x81a": None, b"\x81b": None, b"\x81c": None,
                               b"\x82state": b"s1"}, False)]
    assert len(rows) == 0


def test_a_claim_made_again_before_the_write_keeps_its_row() -> None:
    """A claim released and made again within one turn: the new row replaces the delete,
    so the write leaves the claim's row in place (and the other way round)."""
    store = Recording()
    rows = LocalRows(store)
    rows.put(b"\x81a", None)
    rows.put(b"\x81a", b"claim-2")
    rows.put(b"\x81b", b"claim-1")
    rows.put(b"\x81b", None)
    rows.write()
    assert store.batches == [({b"\x81a": b"claim-2", b"\x81b": None}, False)]
