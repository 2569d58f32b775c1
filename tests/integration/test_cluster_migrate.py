"""A three-node cluster moved from etcd to Oxia and back with ``nereus cluster migrate``,
its nodes pointed at the new coordinator with ``nereus cluster rejoin``, messages pending
throughout: none is lost, and every shard activates above the epoch it had.

Each leg, on real services (Kafka for the Command Topic and the destination, S3 for
checkpoints, the shared etcd and Oxia): messages due ``PENDING_S`` later are queued and
applied by the running nodes (pending in their shards' state); the nodes are stopped (a
precondition checks none of those was published yet); more messages are queued while
every node is down (in the Command Topic only); the cluster is migrated, each home
rejoined, the nodes started on the other coordinator; every shard is ACTIVE there with
its epoch counter's next value, above its epoch before. The end: every acknowledged
schedule applied once and published once (``check_cluster``).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nereus.client import prepare_schedule, queue
from nereus.shard import ShardId
from tests.conftest import run_nereus
from tests.daemon import owned_processes
from tests.integration.cluster_checks import check_cluster, node_events, settle
from tests.integration.cluster_homes import LANE, Cluster, ClusterSpec, Load, make_cluster
from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.kafka_service import kafka_bootstrap, kafka_service  # noqa: F401
from tests.integration.kafka_topic import read_topic
from tests.integration.oxia_service import (  # noqa: F401
    OxiaEndpoint,
    oxia_endpoint,
    oxia_service,
)
from tests.integration.services import S3Service, s3_service  # noqa: F401
from tests.polling import now_ms, wait_until

NODES = ["n1", "n2", "n3"]
PENDING_S = 25  # the pending messages are due this long after they are queued
PER_BATCH = 240

pytestmark = [pytest.mark.timeout(280), pytest.mark.etcd, pytest.mark.oxia]


@pytest.fixture
def on_etcd(tmp_path: Path, kafka_bootstrap: str,  # noqa: F811
            s3_service: S3Service, etcd_endpoint: EtcdEndpoint,  # noqa: F811
            oxia_endpoint: OxiaEndpoint) -> Iterator[tuple[Cluster, ClusterSpec]]:  # noqa: F811
    """Three nodes of a fresh cluster on etcd, every shard ACTIVE; and the same cluster's
    spec on Oxia (the same name, ``c<run>``, on the shared Oxia)."""
    spec = ClusterSpec(run=uuid.uuid4().hex[:10], bootstrap=kafka_bootstrap,
                       etcd=f"{etcd_endpoint.host}:{etcd_endpoint.port}",
                       s3=s3_service.require(), session_ttl_ms=4_000)
    oxia = dataclasses.replace(spec, oxia=oxia_endpoint.target)
    with owned_processes() as owned, make_cluster(tmp_path, spec, NODES, owned) as cluster:
        for node in NODES:
            cluster.start(node)
        cluster.wait_all_active(60, on=set(NODES))
        yield cluster, oxia


def _batch(spec: ClusterSpec, prefix: str, deliver_at_ms: int, load: Load) -> list[str]:
    """PER_BATCH schedules queued straight to the Command Topic (counted in ``load`` once
    the log acknowledged them)."""
    ids = [f"{prefix}{n:05d}" for n in range(PER_BATCH)]
    with spec.logs() as logs:
        queue([prepare_schedule(spec.route, command_id=f"s-{m}", delay_message_id=m,
                                lane=LANE, deliver_at_ms=deliver_at_ms, key=m,
                                payload=m.encode()) for m in ids], logs)
    load.deliver.update(dict.fromkeys(ids, deliver_at_ms))
    return ids


def _applied_everywhere(cluster: Cluster) -> bool:
    """Every shard ACTIVE with nothing left to apply on the node that owns it."""
    from nereus.errors import NereusError

    shards: set[str] = set()
    for node in cluster.nodes.values():
        try:
            status: dict[str, Any] = node.admin.get("/v1/status")
        except NereusError:
            return False
        shards |= {s["shard"] for s in status["shards"]
                   if s["state"] == "ACTIVE" and s["lag"] == 0}
    return shards == {str(s) for s in cluster.spec.shards}


def _epochs(cluster: Cluster) -> dict[ShardId, int]:
    return {shard: owned.record.epoch for shard, owned in cluster.store.owners().items()}


def _first_epochs(cluster: Cluster, wanted: dict[str, int]) -> dict[str, int] | None:
    """Each shard's lowest epoch at or above ``wanted``'s in the nodes' ``shard_active``
    events (None until every shard has one)."""
    first: dict[str, int] = {}
    for node in NODES:
        for event in node_events(cluster, node, "shard_active"):
            shard, epoch = event["shard"], event["epoch"]
            if shard in wanted and epoch >= wanted[shard]:
                first[shard] = min(epoch, first.get(shard, epoch))
    return first if set(first) == set(wanted) else None


def _cli(*args: str, home: Path) -> dict[str, Any]:
    result = run_nereus("--json", *args, home=home)
    assert result.code == 0, (args, result.stdout, result.stderr)
    document: dict[str, Any] = result.json()
    return document


def _leg(cluster: Cluster, to: ClusterSpec, load: Load, name: str) -> Cluster:
    """One move of the running cluster to ``to``'s coordinator (the module docstring's
    steps); the cluster running there, every shard ACTIVE above its epoch before."""
    spec = cluster.spec
    pending = _batch(spec, f"{name}-pending-", now_ms() + PENDING_S * 1000, load)
    wait_until("the pending messages applied", lambda: _applied_everywhere(cluster), 30)
    before = _epochs(cluster)
    assert set(before) == set(spec.shards)
    cluster.stop_all()
    published = {r.delay_message_id for r in read_topic(spec.bootstrap, spec.topic)}
    assert not published & set(pending), "pending messages were published before the stop"
    _batch(spec, f"{name}-stopped-", now_ms(), load)  # in the Command Topic only
    operator = cluster.root / "operator"
    started = time.monotonic()
    report = _cli("cluster", "migrate", "--coordinator", spec.coordinator, "--to",
                  to.coordinator, "--reason", f"leg {name}", "--yes", home=operator)
    took = time.monotonic() - started
    assert report["result"] == "MIGRATED"
    copied = {row["shard"]: row["epoch"] for row in report["epochs"]}
    assert copied == {str(shard): epoch for shard, epoch in before.items()}
    for node in NODES:
        rejoined = _cli("cluster", "rejoin", "--to", to.coordinator, home=cluster.home(node))
        assert rejoined["result"] == "REJOINED" and rejoined["previous"] == spec.coordinator
    moved = Cluster(to, cluster.root, cluster.owned, to.store(), _runs=cluster._runs)
    for node in NODES:
        moved.start(node)
    moved.wait_all_active(60)
    after = _epochs(moved)
    print(f"\nleg {name}: {report['records']} records copied in {took:.2f} s "
          f"({report['kinds']}); epochs before {sorted(before.values())}, after "
          f"{sorted(after.values())}")
    assert all(after[shard] > before[shard] for shard in spec.shards), (before, after)
    # the counters came along: each shard's first activation here took the next value (a
    # shard may move again once the later nodes are up, taking another)
    wanted = {str(shard): epoch + 1 for shard, epoch in before.items()}
    first = wait_until("each shard's first activation here in the nodes' logs",
                       lambda: _first_epochs(moved, wanted), 10)
    assert first == wanted, (before, first, after)
    raised = [e for node in NODES for e in node_events(moved, node, "shard_epoch_raised")]
    assert raised == [], raised  # the counters came along: no shard was refused first
    return moved


def test_a_cluster_moves_from_etcd_to_oxia_and_back_losing_nothing(
        on_etcd: tuple[Cluster, ClusterSpec]) -> None:
    """A migration is refused while the nodes run (each named); then etcd -> Oxia -> etcd,
    messages pending at each move (applied and not yet due, or only in the Command Topic):
    every shard activates on the new coordinator with an epoch above the one it had, and
    every acknowledged schedule is applied once and published once."""
    cluster, oxia = on_etcd
    refused = run_nereus("--json", "cluster", "migrate", "--coordinator",
                         cluster.spec.coordinator, "--to", oxia.coordinator, "--reason", "x",
                         "--yes", home=cluster.root / "operator")
    assert refused.code == 1, refused.stdout
    assert all(f"node {node} " in refused.json()["error"] for node in NODES), refused.stdout
    load = Load(cluster.spec, cluster.spec.logs())
    on_oxia = _leg(cluster, oxia, load, "a")
    settle(on_oxia, load, 60)
    back = _leg(on_oxia, cluster.spec, load, "b")
    settle(back, load, 60)
    back.stop_all()
    outcome = check_cluster(back, load)
    print(f"{len(load.deliver)} scheduled; {outcome.summary()}")
    assert outcome.states == {"PUBLISHED": len(load.deliver)}, outcome.summary()
