"""Two homes under one node id: a second home joined with the id of a live node (run as
two worker processes) is refused by ``engine start`` at once, naming the live node, with
one process or several, and leaves nothing running; ``init --join`` refuses the id while
the node's workers live. Real services, as for the other cluster modules
(``cluster_homes``): Kafka, S3, etcd."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_nereus
from tests.daemon import owned_processes
from tests.integration.cluster_homes import ClusterSpec, make_cluster
from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.kafka_service import (  # noqa: F401
    kafka_bootstrap,
    kafka_service,
)
from tests.integration.services import S3Service, s3_service  # noqa: F401
from tests.integration.test_engine_workers import worker_pids

pytestmark = pytest.mark.timeout(180)


def _json(home: Path, *args: str, code: int) -> Any:
    result = run_nereus("--json", *args, home=home, timeout=150)
    assert result.code == code, f"nereus {' '.join(args)} exited {result.code}: " \
        f"{result.stdout}{result.stderr}"
    return result.json()


def test_a_second_home_under_a_live_nodes_id_is_refused_naming_it(
        tmp_path: Path, kafka_bootstrap: str, etcd_endpoint: EtcdEndpoint,  # noqa: F811
        s3_service: S3Service) -> None:  # noqa: F811
    """Node ``a`` runs two workers (``a-w0``, ``a-w1``). Home ``b``, joined as ``a`` too:
    ``engine start --workers 2`` and ``--workers 1`` each exit 1 at once naming ``a-w0``
    and where it runs (before: exit 0, its workers failing with NodeIdInUse behind a
    status that said they ran), and nothing of ``b`` is left running; ``a`` keeps every
    shard. ``init --join --node-id a`` for a third home is refused while ``a``'s workers
    live (before: only a member named exactly ``a`` was seen)."""
    spec = ClusterSpec(run=uuid.uuid4().hex[:10], bootstrap=kafka_bootstrap,
                       etcd=f"{etcd_endpoint.host}:{etcd_endpoint.port}",
                       s3=s3_service.require(), partitions=4)
    with owned_processes() as owned, make_cluster(tmp_path, spec, ["a", "b"], owned) as cluster:
        (cluster.home("b") / "nereus.toml").write_text(spec.node_toml("a"))
        cluster.start("a", workers=2)
        cluster.wait_all_active(60, on={"a-w0", "a-w1"})
        a_workers = cluster.store.members()["a-w0"]
        for workers in ("2", "1"):
            refused = _json(cluster.home("b"), "engine", "start", "--workers", workers, code=1)
            assert "node id 'a-w0' is already in use by a live node" in refused["hint"], refused
            assert a_workers.address in refused["hint"], refused
            status = _json(cluster.home("b"), "engine", "status", code=4)
            assert status["running"] is False
            assert not worker_pids(cluster.home("b"))
        assert set(cluster.active_owners().values()) <= {"a-w0", "a-w1"}
        assert len(cluster.active_owners()) == spec.partitions

        joined = _json(tmp_path / "c", "init", "--join", spec.coordinator, "--node-id", "a",
                       code=1)
        assert "already in use by a live node" in joined["error"], joined
        assert not (tmp_path / "c" / "nereus.toml").exists()
        cluster.stop_all()
