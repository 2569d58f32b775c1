"""The one way to append: a ``LogSink`` answers typed QUEUED receipts in the order given,
grouped per shard; a receipt prints its result keys only once APPLIED."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
import pytest

from nereus.client import Evidence, LogSink, Receipt, RouteRef, prepare_cancel
from nereus.records.vocabulary import ResultStatus
from nereus.shard import ShardId
from nereus.state.values import Result


@dataclass(frozen=True)
class _Got:
    position: int
    broker_ms: int


class _Log:
    def __init__(self) -> None:
        self.records: list[bytes] = []

    def append(self, payloads: Sequence[bytes]) -> list[_Got]:
        start = len(self.records)
        self.records += payloads
        return [_Got(start + n, 1_000) for n in range(len(payloads))]


def test_a_log_sink_answers_one_queued_receipt_per_command_in_order() -> None:
    """Commands for two shards come back in the order given, each with its log position."""
    route = RouteRef("default", 2)
    logs = {ShardId("default", p): _Log() for p in range(2)}
    prepared = [prepare_cancel(route, command_id=f"c{n}", delay_message_id=f"m{n}",
                               shard=ShardId("default", n % 2)) for n in range(5)]
    receipts = LogSink(logs.__getitem__).submit(prepared, wait=False)
    assert [r.command_id for r in receipts] == [f"c{n}" for n in range(5)]
    assert [(r.shard, r.source_position) for r in receipts] == [
        ("default/0", 0), ("default/1", 0), ("default/0", 1), ("default/1", 1), ("default/0", 2)]
    assert all(r.evidence == "QUEUED" and r.result is msgspec.UNSET for r in receipts)
    assert [len(log.records) for log in logs.values()] == [3, 2]


def test_a_log_sink_cannot_wait() -> None:
    """Without an engine nothing applies the commands: waiting is refused, not faked."""
    with pytest.raises(ValueError, match="cannot wait"):
        LogSink(lambda _shard: _Log()).submit([], wait=True)


def test_a_receipt_prints_result_keys_only_once_applied() -> None:
    """QUEUED receipts carry no result keys (nothing is known); APPLIED ones carry all."""
    queued = Receipt(kind="CANCEL", delay_message_id="m", command_id="c", shard="default/0",
                     source_position=3, broker_time=None, evidence=Evidence.QUEUED)
    assert "result" not in msgspec.to_builtins(queued)
    assert "duplicate_of" not in msgspec.to_builtins(queued)
    applied = queued.with_result(Result(ResultStatus.APPLIED, "CANCEL", 3, "ab",
                                        delay_message_id="m"), record_sha256="ab")
    document = msgspec.to_builtins(applied)
    assert document["result"] == "APPLIED" and document["reason"] is None
    assert document["evidence"] == "APPLIED" and document["duplicate_of"] is None
    assert list(document)[:7] == ["kind", "delay_message_id", "command_id", "shard",
                                  "source_position", "broker_time", "evidence"]
