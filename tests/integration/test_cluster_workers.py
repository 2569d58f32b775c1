"""A node of a cluster that runs several worker processes (``--workers 2`` on a node's
home): each worker is a member ``<node_id>-w<K>`` of the cluster and takes its share of
the shards, the node's admin socket answers for the node (its workers' shards; another
node's asked through a worker), and under load every acknowledged schedule is applied
once and published once.

Real services, as for the three-node module (``cluster_homes``): Kafka, S3, etcd.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_nereus
from tests.daemon import owned_processes
from tests.integration.cluster_checks import check_cluster, settle_and_stop
from tests.integration.cluster_homes import ClusterSpec, Load, make_cluster
from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.kafka_service import (  # noqa: F401
    kafka_bootstrap,
    kafka_service,
)
from tests.integration.services import S3Service, s3_service  # noqa: F401
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(120)


def test_a_node_with_two_workers_is_two_members_and_answers_for_the_node(
        tmp_path: Path, kafka_bootstrap: str, etcd_endpoint: EtcdEndpoint,  # noqa: F811
        s3_service: S3Service) -> None:  # noqa: F811
    """Node ``a`` with two workers and node ``b`` with one share six shards two by two;
    ``a``'s engine status lists exactly its workers' shards, ``a``'s home shows a message
    that ``b`` owns, ``cluster status`` lists the three members alive, and every
    acknowledged schedule ends published once with nothing UNCERTAIN; ``cluster status``
    names the nodes ``a`` and ``b``, ``a``'s workers under it."""
    spec = ClusterSpec(run=uuid.uuid4().hex[:10], bootstrap=kafka_bootstrap,
                       etcd=f"{etcd_endpoint.host}:{etcd_endpoint.port}",
                       s3=s3_service.require())
    members = {"a-w0", "a-w1", "b"}
    with owned_processes() as owned, make_cluster(tmp_path, spec, ["a", "b"], owned) as cluster:
        cluster.start("a", workers=2)
        cluster.start("b")
        cluster.wait_all_active(60, on=members)
        wait_until("each member owning two shards",
                   lambda: Counter(cluster.active_owners().values()) == dict.fromkeys(members, 2),
                   30, seen=cluster.active_owners)
        load = Load(spec, spec.logs())
        load.start()
        try:
            load.acknowledged(300)
            owners = cluster.active_owners()
            status = run_nereus("--json", "engine", "status", home=cluster.home("a"))
            assert status.code == 0, status.stderr
            assert {s["shard"] for s in status.json()["shards"]} == {
                str(s) for s, n in owners.items() if n.startswith("a-")}
            names = {w["name"].partition("/")[0] for w in status.json()["workers"]}
            assert {"process-0", "process-1", "a-w0", "a-w1"} <= names, names

            of_b = next(m for m in load.deliver if owners[spec.route.shard_for(m)] == "b")
            shown: list[dict[str, object]] = []
            wait_until(f"{of_b} shown from a's home", lambda: _shown(
                run_nereus("--json", "message", "show", of_b, home=cluster.home("a")), shown),
                30)
            assert shown[0]["shard"] == str(spec.route.shard_for(of_b))
            assert shown[0]["delay_message_id"] == of_b

            nodes = run_nereus("--json", "cluster", "status", home=cluster.home("a"))
            assert nodes.code == 0, nodes.stderr
            alive = {n["node_id"]: [w["worker_id"] for w in n["workers"] if w["alive"]]
                     for n in nodes.json()["nodes"] if n["alive"]}
            assert alive == {"a": ["a-w0", "a-w1"], "b": []}
        finally:
            load.stop()
        settle_and_stop(cluster, load)
        outcome = check_cluster(cluster, load)
        print(f"\n{len(load.deliver)} scheduled; {outcome.summary()}")
        assert outcome.uncertain == [] and outcome.twice == [], outcome.summary()


def _shown(result: CliResult, into: list[dict[str, object]]) -> bool:
    """Whether ``message show`` answered; its document appended to ``into``."""
    if result.code == 0:
        into.append(result.json())
    return result.code == 0
