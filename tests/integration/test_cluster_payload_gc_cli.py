"""``nereus payload gc`` in a node's home judges only the objects of the shards ACTIVE on
that node, as the coordinator says, each against its own shard: on the real services (the
coordinator in etcd, the Command Topic on Kafka, the objects in S3), with ownership
records written here and no engine running, so nothing else collects meanwhile."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from nereus.cluster.records import OwnerState
from nereus.payload_objects import object_key
from nereus.shard import ShardId
from tests.conftest import run_nereus
from tests.daemon import owned_processes
from tests.integration.cluster_homes import BUCKET, ROUTE, ClusterSpec, make_cluster
from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.kafka_service import (  # noqa: F401
    kafka_bootstrap,
    kafka_service,
)
from tests.integration.services import S3Service, s3_service  # noqa: F401
from tests.polling import now_ms


@pytest.mark.timeout(120)
def test_payload_gc_on_a_node_judges_only_the_shards_it_owns(
        tmp_path: Path, kafka_bootstrap: str, etcd_endpoint: EtcdEndpoint,  # noqa: F811
        s3_service: S3Service) -> None:  # noqa: F811
    """Node n1 owns default/0 and n2 default/1. In n1's home, ``--dry-run`` names the shards
    it judged (``shards``) and would delete only default/0's stray object; ``--key`` on
    default/1's object is refused (exit 2) naming the shard; ``--yes`` deletes n1's stray
    and leaves n2's and an object under no shard's prefix in S3."""
    spec = ClusterSpec(run=uuid.uuid4().hex[:10], bootstrap=kafka_bootstrap,
                       etcd=f"{etcd_endpoint.host}:{etcd_endpoint.port}",
                       s3=s3_service.require(), partitions=2)
    mine, theirs = ShardId(ROUTE, 0), ShardId(ROUTE, 1)
    stray, other = object_key(ROUTE, 0, "stray"), object_key(ROUTE, 1, "theirs")
    custom = "payloads/elsewhere/custom"
    with owned_processes() as owned, make_cluster(tmp_path, spec, ["n1", "n2"], owned) as c:
        session = c.store.handle.coordinator.create_session(30_000, client_identity="test")
        try:
            for shard, node in ((mine, "n1"), (theirs, "n2")):
                taken = c.store.take(session, shard, node_id=node, owner_id=f"test-{node}",
                                     now_ms=now_ms())
                assert taken is not None
                c.store.update_owner(session, shard, taken, state=OwnerState.ACTIVE)
            client, root = spec.s3.client(), f"{spec.run}/"
            for key in (stray, other, custom):
                client.put_object(Bucket=BUCKET, Key=root + key, Body=b"nobody reserved this")

            def left() -> set[str]:
                listed = client.list_objects_v2(Bucket=BUCKET, Prefix=root + "payloads/")
                return {item["Key"][len(root):] for item in listed.get("Contents", [])}

            home = c.home("n1")
            dry = run_nereus("--json", "payload", "gc", "--dry-run", home=home)
            assert dry.code == 0, dry.stderr
            doc = json.loads(dry.stdout)
            assert doc["shards"] == ["default/0"]
            assert [(o["key"], o["reason"]) for o in doc["deleted"]] == [
                (stray, "no payload stage in any shard")]
            assert doc["kept"] == []
            refused = run_nereus("--json", "payload", "gc", "--key", other, "--yes", home=home)
            assert refused.code == 2, refused.stdout
            assert "belongs to shard default/1, which is not ACTIVE on this node" in \
                json.loads(refused.stdout)["error"]
            done = run_nereus("--json", "payload", "gc", "--yes", home=home)
            assert done.code == 0, done.stderr
            assert [o["key"] for o in json.loads(done.stdout)["deleted"]] == [stray]
            assert left() == {other, custom}
            human = run_nereus("payload", "gc", "--dry-run", home=c.home("n2"))
            assert human.code == 0, human.stderr
            assert "node n2: the objects of the shards ACTIVE here (default/1)" in human.stdout
            assert f"would delete {other}" in human.stdout
        finally:
            session.close()
