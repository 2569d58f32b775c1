"""Ordered lanes keep order: the ordered head is released on every path that ends a claim.

An ORDERED lane (``ordered = true`` in nereus.toml, replicated into the lane policy by the
engine) places keyed messages by their key, so one key's messages share a shard, and the
planner claims a key's next message only when no earlier one is claimed or unsettled.
Before this, the head was released only by an outcome: a claim that ended any other way (a
STALE admission after the lane closed, an expired claim, a decline) kept its key held and
every later message of that key waited until the engine restarted.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.adapters.backends.shardlog.protocol import Receipt, ShardLog
from nereus.records import (
    Disposition,
    Gate,
    LaneGate,
    Outcome,
    PublishAdmission,
    decode,
    encode,
)
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.values import Lane, Result, decode_value
from nereus.timespec import parse_time_ms
from tests.integration.doubles import DelegatingLog, QuietDestination
from tests.integration.engine_harness import in_process_engine, now_ms
from tests.polling import wait_until

if TYPE_CHECKING:
    from nereus.engine.admin.api import AdminApi
    from nereus.engine.shard.owner_loop import ShardLoop

ORDERED_LANE = ('[lanes.local]\ndestination = "file"\npath = "outbox/local.jsonl"\n'
                "ordered = true\n")
COUNT = 50


def gate(lane_gate: Gate, n: int) -> bytes:
    return encode(LaneGate(lane="local", gate=lane_gate, operator="test",
                           reason="close around the due time", idempotency_key=f"gate-{n}"))


class CloseBeforeAdmission(DelegatingLog):
    """The shard's real log, but the lane's CLOSE is appended just before the admission of
    one chosen message: the claim was made with the lane OPEN, its admission is applied
    with the lane CLOSED (STALE LANE_CLOSED), deterministically."""

    def __init__(self, inner: ShardLog, target: str) -> None:
        super().__init__(inner)
        self.target = target
        self.closed = threading.Event()

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        if not self.closed.is_set() and any(
                isinstance(record := decode(p), PublishAdmission)
                and record.delay_message_id == self.target for p in payloads):
            self.inner.append([gate(Gate.CLOSED, 1)])
            self.closed.set()
        return self.inner.append(payloads)


@pytest.mark.timeout(120)
def test_closing_and_reopening_an_ordered_lane_leaves_no_key_stuck(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """50 same-key messages due together; the lane closes between the claim and the
    admission of the 11th (STALE LANE_CLOSED) and reopens: all publish, once each, in
    deliverAt order, none stuck behind the released claim."""
    from nereus.engine.process import home_engine as engine_module

    interposed: list[CloseBeforeAdmission] = []

    def open_interposed(*args: Any, **kwargs: Any) -> CloseBeforeAdmission:
        log = CloseBeforeAdmission(open_shard_log(*args, **kwargs), target="m040")
        interposed.append(log)
        return log

    monkeypatch.setattr(engine_module, "open_shard_log", open_interposed)
    home = tmp_path / "home"
    with in_process_engine(home, partitions=3, lanes=ORDERED_LANE) as h:
        for loop in h.engine.shards.values():
            raw = loop.store.get(keys.lane_key("local"))
            assert raw is not None and decode_value(raw, Lane).ordered, "ordering replicated"
        base = now_ms() + 1_000
        # ids in reverse of their due order: the timeline order is by time, not by id
        prepared = [h.schedule(f"m{COUNT - n:03d}", base + n * 10, key="k")
                    for n in range(COUNT)]
        shards = {item.shard for item in prepared}
        assert len(shards) == 1, "one key, one shard"
        (shard,) = shards
        h.queue(prepared)
        loop = h.engine.shards[shard]
        wait_until("the lane closed mid-run", lambda: _gate(loop) == Gate.CLOSED, 30)
        wait_until("the claims the close ended are released",
                   lambda: loop.status().claims == 0 and loop.in_flight == 0, 10)
        stale = [r for r in _results(loop) if r.reason == "LANE_CLOSED"]
        assert [r.delay_message_id for r in stale] == ["m040"], "the close did not hit a claim"
        assert len(h.outbox()) == 10
        h.append(shard, [gate(Gate.OPEN, 2)])
        wait_until(f"all {COUNT} published after the lane reopened",
                   lambda: len(h.outbox()) >= COUNT, 30)
        lines = h.outbox()
    ids = [line["delay_message_id"] for line in lines]
    assert len(ids) == len(set(ids)) == COUNT, "a message published twice"
    deliver = [parse_time_ms(line["deliver_at"]) for line in lines]
    assert deliver == sorted(deliver), "published out of deliverAt order"
    assert all(parse_time_ms(line["published_at"]) >= parse_time_ms(line["deliver_at"])
               for line in lines)


def _results(loop: ShardLoop) -> list[Result]:
    return [decode_value(raw, Result) for _, raw in loop.store.scan_prefix(keys.RESULT)]


def _gate(loop: ShardLoop) -> Gate:
    raw = loop.store.get(keys.lane_key("local"))
    assert raw is not None
    return decode_value(raw, Lane).gate


def test_keyed_messages_of_an_ordered_lane_share_a_shard_and_are_found_by_id(
        tmp_path: Path) -> None:
    """Placed by key across four shards, yet the admin API finds each by its id."""
    from nereus.engine.admin.api import AdminApi

    home = tmp_path / "home"
    with in_process_engine(home, partitions=4, lanes=ORDERED_LANE) as h:
        ids = [f"order-{n}" for n in range(20)]
        prepared = [h.schedule(mid, now_ms() + 60_000, key="customer-7") for mid in ids]
        assert len({p.shard for p in prepared}) == 1
        assert {h.route.shard_for(mid) for mid in ids} != {prepared[0].shard}, (
            "the ids alone would have spread them")
        h.queue(prepared)
        api = AdminApi(h.engine)
        wait_until("all applied", lambda: all(_found(api, mid) for mid in ids), 10)
        assert {api.message(mid).shard for mid in ids} == {str(prepared[0].shard)}
        assert isinstance(prepared[0].shard, ShardId)


def _found(api: AdminApi, mid: str) -> bool:
    from nereus.errors import NotFound

    try:
        api.message(mid)
    except NotFound:
        return False
    return True


class RefusesFirstSendOf(QuietDestination):
    """A file destination that refuses the first send of one message (NOT_PUBLISHED
    RETRIABLE: the broker said no, nothing was written) and takes every other."""

    def __init__(self, path: Path, target: str) -> None:
        from nereus.adapters.backends.destination.file_outbox import FileDestination

        self.file = FileDestination("local", path)
        self.target = target
        self.refused = threading.Event()

    def publish(self, requests: Sequence[PublishRequest], now: Any) -> list[PublishResult]:
        if not self.refused.is_set() and any(
                r.template.delay_message_id == self.target for r in requests):
            self.refused.set()
            return [PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED, Disposition.RETRIABLE,
                                  "refused for the test") for r in requests]
        return self.file.publish(requests, now)


@pytest.mark.timeout(120)
def test_a_head_refused_once_is_published_before_the_rest_of_its_key(tmp_path: Path) -> None:
    """Five messages of one key due 100 ms apart; the destination refuses the first's first
    send (retriable), so it goes back on the timeline after its backoff, behind the others'
    due times. All five reach the destination once each, in deliverAt order: the others
    wait for the head (before, they were published first)."""
    home = tmp_path / "home"
    destination = RefusesFirstSendOf(home / "outbox" / "local.jsonl", "k-0")
    with in_process_engine(home, partitions=1, lanes=ORDERED_LANE,
                        destinations={"local": destination}) as h:
        base = now_ms() + 500
        h.queue([h.schedule(f"k-{n}", base + n * 100, key="k") for n in range(5)])
        wait_until("all five published", lambda: len(h.outbox()) >= 5, 30)
        lines = h.outbox()
    assert destination.refused.is_set()
    ids = [line["delay_message_id"] for line in lines]
    assert ids == [f"k-{n}" for n in range(5)], ids
