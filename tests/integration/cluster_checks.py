"""What a cluster test checks once its load has stopped: the nodes settle, stop, and every
shard's newest store (the home whose store applied the most of the shard's log: its last
owner's) is held to the promises of issue 14.

* every record of each Command Topic partition applied exactly once, every acknowledged
  schedule with its result;
* every message PUBLISHED (exactly one destination record, its published attempt's, never
  before deliverAt) or UNCERTAIN (an UNKNOWN attempt, whose outcome died with a node, and no
  record on the topic);
* a message with two destination records must have had an UNKNOWN attempt.

``Outcome`` lists the UNCERTAIN messages and the doubly published ones so the test prints
both.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nereus.layout import HomeLayout
from nereus.records import AttemptState, MessageState
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt
from nereus.views import find_message
from tests.integration.attempt_ledger import attempts_of, check_not_published
from tests.integration.cluster_homes import Cluster, Load, NodeRun
from tests.integration.kafka_topic import TopicRecord, read_topic
from tests.integration.shard_logs import check_applied_to_end
from tests.polling import now_ms, wait_until


@dataclass
class Outcome:
    """What the cluster did with the load."""

    states: Counter[str] = field(default_factory=Counter)
    uncertain: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    attempts: dict[str, Attempt] = field(default_factory=dict)  # by attempt id
    records: list[TopicRecord] = field(default_factory=list)

    def summary(self) -> str:
        return (f"states {dict(self.states)}; UNCERTAIN ({len(self.uncertain)}): "
                f"{self.uncertain[:20]}; published twice ({len(self.twice)}): "
                f"{self.twice[:20]}; destination records {len(self.records)}")


def node_events(cluster: Cluster, node_id: str, event: str) -> list[dict[str, Any]]:
    """The ``event`` lines of a node's engine log, in order."""
    path = HomeLayout(cluster.home(node_id)).logs / "engine.log"
    lines = path.read_text().splitlines() if path.exists() else []
    found = [json.loads(line) for line in lines if f'"{event}"' in line]
    return [fields for fields in found if fields.get("event") == event]


def _status(node: NodeRun) -> dict[str, Any] | None:
    from nereus.errors import NereusError

    try:
        answer: dict[str, Any] = node.admin.get("/v1/status")
    except NereusError:
        return None
    return answer


def _caught_up(status: dict[str, Any] | None) -> bool:
    return status is not None and all(
        s["lag"] == 0 and s["in_flight"] == 0 and s["claims"] == 0
        for s in status["shards"]) and not any(
        lane["messages_by_state"].get("SCHEDULED") or lane["messages_by_state"].get(
            "PUBLISHING") for lane in status["lanes"])


def _settled(cluster: Cluster, live: list[NodeRun]) -> bool:
    """Every shard ACTIVE on the node its placement names (no move under way: a shard
    between two owners is listed by neither, and its due messages would look done), and
    nothing left due or in flight on any live node."""
    placed = {shard: placement.node_id
              for shard, (placement, _) in cluster.store.placements().items()}
    if cluster.active_owners() != placed or len(placed) != cluster.spec.partitions:
        return False
    statuses = [_status(node) for node in live]
    listed = {s["shard"] for status in statuses if status is not None
              for s in status["shards"] if s["state"] == "ACTIVE"}
    return listed == {str(shard) for shard in cluster.spec.shards} and all(
        _caught_up(status) for status in statuses)


def _landed_unknown(cluster: Cluster, live: list[NodeRun]) -> set[str]:
    """UNKNOWN attempts whose record is on the topic (evidence recovery still owes them)."""
    unknown: set[str] = set()
    for node in live:
        answer = node.admin.get("/v1/attempts", state="UNKNOWN")
        unknown |= {a["attempt_id"] for a in answer["attempts"]}
    if not unknown:
        return set()
    return unknown & {r.attempt_id for r in read_topic(cluster.spec.bootstrap,
                                                       cluster.spec.topic)}


def settle(cluster: Cluster, load: Load, deadline_s: float = 45.0) -> None:
    """After the load stopped: every shard ACTIVE, nothing left due on any live node,
    evidence recovery done with what landed (the nodes keep running)."""
    cluster.wait_all_active(deadline_s)
    live = [n for n in cluster.nodes.values() if n.proc.poll() is None]
    wait_until("every shard settled on its node and nothing left due",
               lambda: now_ms() >= load.last_due_ms + 300 and _settled(cluster, live),
               deadline_s, interval_s=0.2, seen=lambda: [_status(n) for n in live])
    wait_until("evidence recovery settling every UNKNOWN attempt that landed",
               lambda: not _landed_unknown(cluster, live), deadline_s, interval_s=0.5)


def settle_and_stop(cluster: Cluster, load: Load, deadline_s: float = 45.0) -> None:
    """``settle``, then every node stopped with SIGTERM."""
    settle(cluster, load, deadline_s)
    cluster.stop_all()


def newest_store(cluster: Cluster, shard: ShardId) -> Path:
    """The state of ``shard`` that applied the most of its log, over every home."""
    best: tuple[int, Path] | None = None
    for node_id in cluster.nodes:
        path = HomeLayout(cluster.home(node_id)).shard_state(shard)
        if not path.exists():
            continue
        with ShardStore.open(path, read_only=True) as store:
            applied = store.applied_position()
        if applied is not None and (best is None or applied > best[0]):
            best = (applied, path)
    assert best is not None, f"no home holds a state of {shard}"
    return best[1]


def check_cluster(cluster: Cluster, load: Load) -> Outcome:
    """Issue 14's promises over what ``load`` scheduled (see the module's docstring)."""
    spec = cluster.spec
    outcome = Outcome(records=read_topic(spec.bootstrap, spec.topic))
    copies = Counter(r.delay_message_id for r in outcome.records)
    by_attempt = {r.attempt_id: r for r in outcome.records}
    with spec.logs() as logs:
        ends = {s: logs(s).end_position() for s in spec.shards}
    for shard in spec.shards:
        with ShardStore.open(newest_store(cluster, shard), read_only=True) as store:
            check_applied_to_end(store, ends[shard], shard)
            attempts = attempts_of(store)
            check_not_published(attempts, set(by_attempt))
            outcome.attempts.update({a.attempt_id: a for a in attempts})
            mine = [m for m in load.deliver if spec.route.shard_for(m) == shard]
            for m in mine:
                assert store.get(keys.result_key(f"c/s-{m}")) is not None, f"{m}: no result"
                _check_message(store, m, [a for a in attempts if a.delay_message_id == m],
                               copies[m], load.deliver[m], by_attempt, outcome)
    assert sum(outcome.states.values()) == len(load.deliver)
    return outcome


def _check_message(store: ShardStore, m: str, mine: list[Attempt], count: int,
                   deliver_at_ms: int, by_attempt: dict[str, TopicRecord],
                   outcome: Outcome) -> None:
    message = find_message(store, m)
    assert message is not None, f"{m}: scheduled, acknowledged, and lost"
    outcome.states[message.state] += 1
    for attempt in mine:
        landed = by_attempt.get(attempt.attempt_id)
        assert landed is None or landed.timestamp_ms >= deliver_at_ms, (
            f"{m}: published at {landed.timestamp_ms}, before its deliverAt {deliver_at_ms}")
    unknown = any(a.state == AttemptState.UNKNOWN or a.evidence.startswith("evidence scan:")
                  for a in mine)
    if count > 1:
        outcome.twice.append(f"{m} x{count} attempts {[a.attempt_id for a in mine]}")
        assert unknown, f"{m}: {count} records on the topic, no UNKNOWN attempt: {mine}"
    if message.state == MessageState.PUBLISHED:
        won = [a for a in mine if a.state == AttemptState.PUBLISHED]
        assert won and won[0].attempt_id in by_attempt, f"{m}: published attempt not on topic"
        assert count == 1 or unknown, f"{m}: PUBLISHED, {count} records on the topic"
    else:
        assert message.state == MessageState.UNCERTAIN, (
            f"{m}: {message.state} after everything was due ({mine})")
        assert any(a.state == AttemptState.UNKNOWN for a in mine), mine
        assert count == 0, f"{m}: UNCERTAIN, yet {count} records on the topic"
        outcome.uncertain.append(m)
