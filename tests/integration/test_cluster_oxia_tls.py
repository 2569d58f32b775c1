"""A node daemon of a cluster whose coordinator is Oxia over TLS with client certificates
(``scripts/services up oxia-secure``): the node's ``[cluster]`` names the CA and its client
certificate, and the engine joins (session, member record, ownership) and owns every shard
through them, then stops cleanly. The Command Topic and lane are on the plain Kafka, the
objects on the plain S3 (``cluster_homes``)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from nereus.adapters.backends.coordination.oxia_security import use_oxia_security
from tests.daemon import owned_processes
from tests.integration.cluster_homes import ClusterSpec, make_cluster
from tests.integration.kafka_service import kafka_bootstrap, kafka_service  # noqa: F401
from tests.integration.secure_services import SecureOxia
from tests.integration.services import S3Service, s3_service  # noqa: F401

pytestmark = [pytest.mark.oxia, pytest.mark.timeout(120)]


def test_a_node_joins_and_owns_its_shards_over_tls(
        tmp_path: Path, oxia_secure: SecureOxia, kafka_bootstrap: str,  # noqa: F811
        s3_service: S3Service) -> None:  # noqa: F811
    """The node's engine reaches the secured Oxia with its [cluster] TLS settings: every
    shard gets an ACTIVE owner on it (a plaintext engine could not even open a session),
    and SIGTERM stops it with exit 0."""
    settings = oxia_secure.cluster_settings("unused")
    tls = "".join(f'{name} = "{getattr(settings, name)}"\n'
                  for name in ("tls_ca_file", "tls_cert_file", "tls_key_file"))
    where = f"{oxia_secure.host}:{oxia_secure.port}"
    spec = ClusterSpec(run=uuid.uuid4().hex[:10], bootstrap=kafka_bootstrap, etcd=where,
                       oxia=where, s3=s3_service.require(), partitions=2, cluster_tls=tls)
    use_oxia_security(settings)  # the test's own store reads the records over TLS too
    with owned_processes() as owned, make_cluster(tmp_path, spec, ["n1"], owned) as cluster:
        cluster.start("n1")
        cluster.wait_all_active(60, on={"n1"})
        cluster.stop_all()
