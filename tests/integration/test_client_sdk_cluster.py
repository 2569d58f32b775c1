"""``DelayClient.from_cluster``: a client that knows only the coordinator's URL learns the
route from the cluster's configuration record and the Command Topic's identity records,
appends to Kafka, and reads results from each shard's owner (a node on this host). Real
services, as for the other cluster modules (``cluster_homes``): Kafka, S3, etcd."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from nereus.client import DelayClient
from tests.daemon import owned_processes
from tests.integration.cluster_homes import ClusterSpec, make_cluster
from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.kafka_service import kafka_bootstrap, kafka_service  # noqa: F401
from tests.integration.services import S3Service, s3_service  # noqa: F401
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(180)


def test_a_client_of_the_cluster_schedules_and_reads_the_owners_result(
        tmp_path: Path, kafka_bootstrap: str, etcd_endpoint: EtcdEndpoint,  # noqa: F811
        s3_service: S3Service) -> None:  # noqa: F811
    """From the coordinator URL alone: partitions and route id as the cluster's record
    and the topic's identity say; a schedule is QUEUED on Kafka, APPLIED by its owner
    node (asked at the admin socket its member record names) and PUBLISHED."""
    spec = ClusterSpec(run=uuid.uuid4().hex[:10], bootstrap=kafka_bootstrap,
                       etcd=f"{etcd_endpoint.host}:{etcd_endpoint.port}",
                       s3=s3_service.require(), partitions=2)
    with owned_processes() as owned, make_cluster(tmp_path, spec, ["a"], owned) as cluster:
        cluster.start("a")
        cluster.wait_all_active(60)
        with DelayClient.from_cluster(spec.coordinator) as client:
            route_id = client.source.settings.id
            assert (client.route.name, client.route.partitions, client.route.route_id) == \
                ("default", 2, route_id) and route_id
            receipt = client.schedule("m1", "out", delay="300ms", payload=b"hello")
            assert client.result(receipt, wait=60).outcome == "APPLIED"
            wait_until("m1 published", lambda: client.get("m1").state == "PUBLISHED", 60)
        cluster.stop_all()
