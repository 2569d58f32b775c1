"""A warm standby: the node that stands by for a shard (``nereus/cluster/standby.py``)
tails its Command Topic into a copy of its own while another node owns it, so a failover
there replays only the log's tail, not everything since the last checkpoint.

Real services: the Command Topic on Kafka, checkpoints in S3, the coordinator in etcd
(``cluster_homes``); two nodes, two shards, a 4 s session TTL.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from nereus.client import prepare_schedule, queue
from tests.daemon import owned_processes
from tests.integration.cluster_checks import node_events
from tests.integration.cluster_homes import LANE, ClusterSpec, make_cluster
from tests.integration.etcd_service import (  # noqa: F401
    EtcdEndpoint,
    etcd_endpoint,
    etcd_service,
)
from tests.integration.kafka_service import (  # noqa: F401
    kafka_bootstrap,
    kafka_service,
)
from tests.integration.services import S3Service, run_services, s3_service  # noqa: F401
from tests.polling import now_ms, wait_until

PENDING = 5_000  # below [checkpoints] every_records: no checkpoint shortens a cold replay

pytestmark = [pytest.mark.timeout(120), pytest.mark.etcd]


def test_a_failover_opens_the_standbys_warm_copy_and_replays_only_the_tail(
        tmp_path: Path, kafka_bootstrap: str, s3_service: S3Service,  # noqa: F811
        etcd_endpoint: EtcdEndpoint) -> None:  # noqa: F811
    """The survivor warmed the dead owner's shard as its standby (``shard_warm``,
    standby), and its activation after the SIGKILL restored nothing and replayed a few
    records, not the PENDING schedules the shard holds (a cold node replays them all)."""
    spec = ClusterSpec(run=uuid.uuid4().hex[:10], bootstrap=kafka_bootstrap,
                       etcd=f"{etcd_endpoint.host}:{etcd_endpoint.port}",
                       s3=s3_service.require(), partitions=2)
    with owned_processes() as owned, make_cluster(tmp_path, spec, ["n1", "n2"], owned) as c:
        for node in ("n1", "n2"):
            c.start(node)
        wait_until("each node owns a shard",
                   lambda: set(c.active_owners().values()) == {"n1", "n2"}, 60,
                   seen=c.active_owners)
        shard = next(s for s, n in c.active_owners().items() if n == "n2")
        ids = [m for m in (f"m{n:06d}" for n in range(4 * PENDING))
               if spec.route.shard_for(m) == shard][:PENDING]
        with spec.logs() as logs:
            queue([prepare_schedule(spec.route, command_id=f"s-{m}", delay_message_id=m,
                                    lane=LANE, deliver_at_ms=now_ms() + 3_600_000,
                                    payload=b"p") for m in ids], logs)
        wait_until("n1 warm as the standby", lambda: any(
            e["shard"] == str(shard) and e["standby"]
            for e in node_events(c, "n1", "shard_warm")), 30)
        c.nodes["n2"].kill()
        wait_until("n1 owns the shard", lambda: c.active_owners().get(shard) == "n1", 30,
                   seen=c.active_owners)
        active = [e for e in node_events(c, "n1", "shard_active") if e["shard"] == str(shard)]
        restored = [e for e in node_events(c, "n1", "state_restored")
                    if e["shard"] == str(shard)]
        assert active and active[-1]["replayed"] < PENDING // 10, active
        assert not restored, restored
        c.stop_all()
