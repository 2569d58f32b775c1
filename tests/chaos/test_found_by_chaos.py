"""What the chaos runs found that issue 37 §2 does not list, each pinned by a deterministic
test (``xfail(strict=True)`` while the code still breaks it; the mark came off with the fix).

1. **A query with the barrier misses a queued keyed message of an ORDERED lane.** Found by
   ``bench/chaos.py --seed 21 --ops 400 --duration 20 --nemesis none`` (the
   ``barrier_reads_acknowledged_writes`` invariant): a SCHEDULE of lane ``ord`` with key
   ``key-0`` acknowledged QUEUED on ``default/1`` (its key's shard), then ``message show
   --barrier`` answered that there is no such message. The admin API looks for the message
   in every shard's applied state; a message not applied yet is found nowhere, so the
   barrier goes to its *id's* shard (``default/0``), is applied there, and the answer,
   conclusive by its own promise, reads the wrong shard. Here the key's shard is held from
   applying (its log reads nothing for a while) so the race is certain. Fixed: a barrier
   query that does not find the message on its id's shard, on a route with an ORDERED
   lane, puts a barrier on every other shard of the route and looks there (a front door
   asks every worker, a cluster node every owner it reaches).
2. **A repeated operator mutation is answered with the first one's result and changes
   nothing.** Found by ``bench/chaos.py --seed 11 --ops 150 --duration 15 --nemesis
   sigkill`` (file; ``due_messages_settle``: message ``m11-47`` left SCHEDULED 67 s after
   its deliverAt; then the ``operator_mutations_take_effect`` invariant, written for it):
   ``shard pause``, ``shard resume``, ``shard pause``, ``shard resume`` with the same
   reason; the second resume derived the same idempotency key as the first (from the
   command's content and a precondition that is the same again), so the CLI answered
   APPLIED with the first resume's position (``duplicate_of``) and appended nothing: the
   shard stayed paused. ``lane close``, ``lane open``, ``lane close`` leaves the lane OPEN
   the same way, the operator told it was closed. Fixed: a derived key whose APPLIED result
   is no longer in place (applying the command now would change its target again) is
   stepped past like a STALE one (``nereus.operator.plan``); a LANE_CONFIG that changes
   nothing is applied without a new config revision, so a retried ``lane set`` still finds
   its first result.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.adapters.backends.shardlog.protocol import LogRecord, ShardLog
from nereus.client import RouteRef
from nereus.config import RouteSettings
from nereus.engine.admin.api import AdminApi
from nereus.errors import NotFound
from nereus.shard import ShardId
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.integration.doubles import DelegatingLog
from tests.integration.engine_harness import file_lane, in_process_engine, now_ms


class HeldLog(DelegatingLog):
    """A shard's log whose reads return nothing while ``held`` is set: its loop applies
    nothing new (appends still go through)."""

    def __init__(self, inner: ShardLog, held: threading.Event) -> None:
        super().__init__(inner)
        self.held = held

    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        if self.held.is_set():
            return []
        return self.inner.read(from_position, max_records)


@pytest.mark.timeout(60)
def test_a_barrier_query_sees_a_queued_keyed_message_on_its_keys_shard(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A keyed message of an ORDERED lane, placed on its key's shard (not its id's) and
    acknowledged QUEUED there, not applied yet: a query with the query barrier waits for
    it and finds it, SCHEDULED."""
    from nereus.engine.process import home_engine as engine_module

    held = threading.Event()
    key_shard = ShardId("default", 1)

    def open_log(route: RouteSettings, shard: ShardId, home: Path, **kwargs: Any) -> ShardLog:
        log = open_shard_log(route, shard, home, **kwargs)
        return HeldLog(log, held) if shard == key_shard else log

    monkeypatch.setattr(engine_module, "open_shard_log", open_log)
    lanes = file_lane("ord", "outbox/ord.jsonl") + "ordered = true\n"
    with in_process_engine(tmp_path / "home", partitions=2, lanes=lanes) as h:
        mid, key = _placed_apart(h.route, key_shard)
        held.set()
        h.queue([h.schedule(mid, now_ms() + 3_600_000, lane="ord", key=key)])
        releaser = threading.Timer(2.0, held.clear)  # the key's shard applies it then
        releaser.start()
        try:
            answer = AdminApi(h.engine).message(mid, barrier=True)
        except NotFound as exc:
            pytest.fail(f"the barrier query answered {exc.message}")
        finally:
            releaser.cancel()
            held.clear()
        assert answer.state == "SCHEDULED" and answer.shard == str(key_shard)


def _placed_apart(route: RouteRef, key_shard: ShardId) -> tuple[str, str]:
    """A message id and key the ORDERED lane places on ``key_shard`` while the id itself
    hashes to another shard."""
    for n in range(1_000):
        mid, key = f"m{n}", f"key-{n % 7}"
        if route.placement(mid, "ord", key) == key_shard and route.shard_for(mid) != key_shard:
            return mid, key
    raise AssertionError("no id and key placed apart")


@pytest.mark.timeout(120)
def test_closing_a_lane_again_after_opening_it_closes_it(tmp_path: Path) -> None:
    """``lane close``, ``lane open``, ``lane close`` (same lane, same reason, as an operator
    types them): the lane ends CLOSED and the last close appended a record of its own."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "1", home=home).code == 0
    with running_engine(home):
        positions = []
        for step in ("close", "open", "close"):
            done = run_nereus("--json", "lane", step, "local", "--reason", "maintenance",
                              "--yes", "--wait", home=home)
            assert done.code == 0, done.stderr
            (receipt,) = done.json()["receipts"]
            positions.append(receipt["source_position"])
        listed = run_nereus("--json", "lane", "list", home=home)
        gates = {lane["lane"]: lane["gate"] for lane in listed.json()}
    assert len(set(positions)) == 3, f"the last close reused an earlier record: {positions}"
    assert gates["local"] == "CLOSED"
