"""Warming a shard on the node a planned move sends it to (``engine/hosting/cluster/warmup.py``):
its own copy of the state follows the Shard Log while another node owns the shard, so its
activation replays only the tail. Two homes on one machine share the shard's file Shard Log
(a symlink stands in for the Command Topic every node of a cluster reads)."""

from __future__ import annotations

from pathlib import Path

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.cluster.records import Member
from nereus.config import parse_config
from nereus.engine.hosting.cluster.warmup import WarmUp, shares_home
from nereus.engine.process.home_engine import Engine
from nereus.engine.shard.loop_status import ShardState
from nereus.records import RetainBackfill, decode
from nereus.shard import ShardId
from tests.integration.engine_harness import CONFIG, Events, Harness, file_lane, now_ms
from tests.polling import wait_until

SHARD = ShardId("default", 0)


class AlwaysAlive:
    """A coordinator session that never ends (this test grants the epoch by hand)."""

    def lease_problem(self) -> str | None:
        return None


def make_engine(home: Path, events: Events | None = None) -> Engine:
    text = CONFIG.format(partitions=1, lanes=file_lane("local", "outbox/local.jsonl"))
    home.mkdir(parents=True, exist_ok=True)
    (home / "nereus.toml").write_text(text)
    config = parse_config(text, source=str(home / "nereus.toml"))
    return Engine(home, config) if events is None else Engine(home, config, log_event=events)


def owner_settled(owner: Engine, log: ShardLog) -> bool:
    """Whether the owner appended and applied its start-up records: after its barrier and
    the lanes' limits, the retention catch-up of their results (a RETAIN_BACKFILL, a few
    milliseconds later). Records queued before that one would not be the log's last."""
    end = log.end_position()
    return owner.shards[SHARD].applied_position == end - 1 and any(
        isinstance(decode(record.payload), RetainBackfill) for record in log.read(0, end))


def test_a_warmed_target_activates_with_a_short_replay(tmp_path: Path) -> None:
    """While the owner holds the shard, the target's warm-up applies the whole log into its
    own state and appends nothing; after the owner lets go, the target's activation replays
    only the records appended since the warm-up stopped."""
    owner = make_engine(tmp_path / "owner")
    owner.start()
    harness = Harness(owner.home, owner, 1)
    log = owner.open_shard_log(SHARD)
    try:
        wait_until("the owner's start-up records applied", lambda: owner_settled(owner, log), 30)
        due = now_ms() + 3_600_000
        harness.queue([harness.schedule(f"m{n}", due) for n in range(300)])
        end = log.end_position()
        loop = owner.shards[SHARD]
        wait_until("the owner applied the log", lambda: loop.applied_position == end - 1, 30,
                   seen=lambda: (loop.applied_position, end, log.end_position()))

        (tmp_path / "target").mkdir()
        (tmp_path / "target" / "shardlog").symlink_to(tmp_path / "owner" / "shardlog")
        events = Events()
        target = make_engine(tmp_path / "target", events)
        target.start(owned=())
        try:
            warm_up = WarmUp(target, SHARD, events=events, poll_s=0.01)
            warm_up.start()
            wait_until("the warm-up caught up", lambda: warm_up.applied_position == end - 1,
                       30, seen=lambda: (warm_up.applied_position, end, events.seen[-3:]))
            warm_up.stop()
            assert warm_up.replayed == end
            assert log.end_position() == end  # a warm-up never appends

            harness.queue([harness.schedule(f"late{n}", due) for n in range(5)])
            owner.release_shard(SHARD, checkpoint=False)
            tail = log.end_position() - end
            active = target.activate_shard(SHARD, epoch=100, lease=AlwaysAlive())
            assert active.state == ShardState.ACTIVE, active.error
            (activated,) = events.named("shard_active")
            assert activated["replayed"] == tail, (activated, tail)
            assert 5 <= tail < 10
        finally:
            target.stop()
    finally:
        log.close()
        harness.close()
        owner.stop()


def test_no_warm_up_where_the_owner_keeps_its_state_in_this_home(tmp_path: Path) -> None:
    """Nodes that share a home (the worker processes of one host) share one copy of each
    shard's state, the owner's: an owner serving its admin socket from this home on this
    host is recognised, and one on another home or host is not."""
    home = tmp_path / "home"

    def member(address: Path, host: str = "h1") -> Member:
        return Member(node_id="n", host=host, address=str(address), capacity=1, version="",
                      pid=1, started_ms=0)

    assert shares_home(member(home / "run" / "workers" / "1.sock"), host="h1", home=home)
    assert not shares_home(member(tmp_path / "other" / "run" / "admin.sock"), host="h1",
                           home=home)
    assert not shares_home(member(home / "run" / "admin.sock", "h2"), host="h1", home=home)
    assert not shares_home(None, host="h1", home=home)
