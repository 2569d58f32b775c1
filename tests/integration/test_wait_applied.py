"""``--wait`` answers with the result the shard loop applied — the ``Applied`` value it
already holds — not a second read of RocksDB; the store is read only for a position the
loop applied before the wait began."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.admin.wire import AppendRequest, RecordToAppend
from nereus.client import Receipt
from nereus.engine.admin import command_appends as appending
from nereus.engine.admin.api import AdminApi
from tests.integration.engine_harness import in_process_engine, now_ms
from tests.polling import wait_until


def _body(prepared: list[Any], wait_ms: int) -> AppendRequest:
    return AppendRequest(records=[RecordToAppend(shard=str(p.shard), data=p.data)
                                  for p in prepared], wait_ms=wait_ms)


def test_wait_takes_the_result_the_loop_applied(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Every receipt is APPLIED with its result although reading the store would fail."""
    with in_process_engine(tmp_path / "home") as h:
        api = AdminApi(h.engine)

        def no_store_read(*_: object) -> Any:
            raise AssertionError("the result was read back from RocksDB")

        monkeypatch.setattr(appending, "result_at", no_store_read)
        later = now_ms() + 3_600_000
        first = [h.schedule(f"w-{n}", later) for n in range(6)]
        answer = api.submit(_body(first, 10_000)).receipts
        assert [r.evidence for r in answer] == ["APPLIED"] * 6
        assert [r.result for r in answer] == ["APPLIED"] * 6
        assert all(r.duplicate_of is None for r in answer)
        again = api.submit(_body(first[:2], 10_000)).receipts  # an identical retry
        assert [r.duplicate_of for r in again] == [r.source_position for r in answer[:2]]
        assert all(h.engine.shards[s].status() is not None for s in h.engine.shards)


def test_a_position_applied_before_the_wait_is_read_from_the_store(tmp_path: Path) -> None:
    """The loop applied it before anyone asked: the stored result answers."""
    with in_process_engine(tmp_path / "home") as h:
        api = AdminApi(h.engine)
        prepared = [h.schedule("early-1", now_ms() + 3_600_000)]
        (receipt,) = api.submit(_body(prepared, 0)).receipts
        position = receipt.source_position
        loop = h.engine.shards[prepared[0].shard]
        wait_until("the schedule applied", lambda: (loop.applied_position or -1) >= position, 10)
        assert loop.await_result(position, 0.0) is None  # never expected: not held
        view = appending.awaited(receipt, loop, position, prepared[0].data, 0.0)
        assert isinstance(view, Receipt)
        assert view.evidence == "APPLIED" and view.result == "APPLIED"
        assert view.delay_message_id == "early-1"
