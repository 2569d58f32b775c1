"""The secured servers for integration tests: ``scripts/services up kafka-secure``,
``pulsar-secure``, ``s3-secure``, ``etcd-secure`` and ``oxia-secure``.

Kafka with TLS (server certificate only), mTLS (client certificate required), SASL_SSL
(SCRAM-SHA-512 and PLAIN), SASL_SSL (OAUTHBEARER, unsecured JWTs) and SASL_SSL (OAUTHBEARER
over OIDC: signed JWTs from the script's test token issuer, checked against its JWKS)
listeners; Pulsar standalone with TLS and token authentication (client certificates
accepted too); S3Proxy over https only; etcd over TLS with client certificates required
and its auth on; Oxia (a coordinator and a server) over TLS with client certificates
required; all from a throwaway CA the script makes. As with the plain servers, a test
that needs one FAILS (never skips) when it cannot be started, and the session stops it
only if it started it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from tests.integration.services import (
    JAVA_NEEDS,
    Service,
    bring_up,
    cannot_start,
    session_service,
)

if TYPE_CHECKING:
    from nereus.config import ClusterSettings


_Secure = TypeVar("_Secure")


def _starter(name: str, what: str, make: Callable[[dict[str, str]], _Secure], *,
             needs: str = JAVA_NEEDS) -> Callable[[], tuple[Service[_Secure], bool]]:
    """Start ``name`` unless it runs; the service made from ``scripts/services env``'s
    settings by ``make``, or why it could not start (``what`` cannot be tested)."""

    def start() -> tuple[Service[_Secure], bool]:
        settings, started, problem = bring_up(name)
        if settings is None:
            return Service[_Secure](None, error=cannot_start(
                name, what, problem or "unknown problem", needs=needs)), started
        return Service[_Secure](make(settings)), started

    return start


@dataclass(frozen=True, slots=True)
class SecureKafka:
    """The secured broker's listeners (TLS, mTLS, SCRAM/PLAIN, OAUTHBEARER with unsecured
    JWTs whose scope must hold ``nereus.write``, OAUTHBEARER over OIDC with the test issuer's
    token endpoint), its CA and client material, its user."""

    tls: str
    mtls: str
    sasl: str
    certs: Path
    user: str = "nereus"
    oauth: str = ""
    oidc: str = ""
    oidc_token_url: str = ""

    @property
    def password(self) -> str:
        return (self.certs / "kafka-password").read_text().strip()

    @property
    def oidc_client_secret(self) -> str:
        """The secret of the test issuer's client ``nereus`` (its client id is the user)."""
        return (self.certs / "oidc-client-secret").read_text().strip()

    def private_copy(self, directory: Path, name: str) -> Path:
        """The certificate directory's file ``name`` copied 0600 into ``directory`` (a home's
        secret must be its user's own file)."""
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / name
        shutil.copyfile(self.certs / name, target)
        os.chmod(target, 0o600)
        return target


SecureKafkaService = Service[SecureKafka]


@pytest.fixture(scope="session")
def kafka_secure_service() -> Iterator[SecureKafkaService]:
    """``kafka-secure`` up for the session (stopped only if this session started it)."""
    yield from session_service("kafka-secure", _starter(
        "kafka-secure", "Kafka over TLS and SASL", lambda env: SecureKafka(
            tls=env["NEREUS_KAFKA_SECURE_TLS"], mtls=env["NEREUS_KAFKA_SECURE_MTLS"],
            sasl=env["NEREUS_KAFKA_SECURE_SASL"], certs=Path(env["NEREUS_SECURE_CERTS"]),
            oauth=env["NEREUS_KAFKA_SECURE_OAUTH"], oidc=env["NEREUS_KAFKA_SECURE_OIDC"],
            oidc_token_url=env["NEREUS_KAFKA_SECURE_OIDC_TOKEN_URL"])))


@pytest.fixture
def kafka_secure(kafka_secure_service: SecureKafkaService) -> SecureKafka:
    """The secured broker (fails the test when it could not be started)."""
    return kafka_secure_service.require()


@dataclass(frozen=True, slots=True)
class SecurePulsar:
    """The secured standalone: TLS URLs, its CA and client material, its token."""

    service_url: str
    admin_url: str
    certs: Path

    @property
    def token(self) -> str:
        return (self.certs / "pulsar-token").read_text().strip()

    def private_copy(self, directory: Path, name: str) -> Path:
        return SecureKafka("", "", "", self.certs).private_copy(directory, name)


SecurePulsarService = Service[SecurePulsar]


@pytest.fixture(scope="session")
def pulsar_secure_service() -> Iterator[SecurePulsarService]:
    """``pulsar-secure`` up for the session (stopped only if this session started it)."""
    yield from session_service("pulsar-secure", _starter(
        "pulsar-secure", "Pulsar over TLS with tokens", lambda env: SecurePulsar(
            service_url=env["NEREUS_PULSAR_SECURE_URL"],
            admin_url=env["NEREUS_PULSAR_SECURE_HTTPS_URL"],
            certs=Path(env["NEREUS_SECURE_CERTS"]))))


@pytest.fixture
def pulsar_secure(pulsar_secure_service: SecurePulsarService) -> SecurePulsar:
    """The secured Pulsar (fails the test when it could not be started)."""
    return pulsar_secure_service.require()


@dataclass(frozen=True, slots=True)
class SecureS3:
    """S3Proxy over https: its endpoint, the test CA, the access key and its secret."""

    endpoint: str
    certs: Path
    access_key_id: str = "nereus"

    @property
    def secret_access_key(self) -> str:
        return (self.certs / "s3-secret").read_text().strip()


SecureS3Service = Service[SecureS3]


@pytest.fixture(scope="session")
def s3_secure_service() -> Iterator[SecureS3Service]:
    """``s3-secure`` up for the session (stopped only if this session started it)."""
    yield from session_service("s3-secure", _starter(
        "s3-secure", "S3 over https", lambda env: SecureS3(
            endpoint=env["NEREUS_S3_SECURE_ENDPOINT"], certs=Path(env["NEREUS_SECURE_CERTS"]))))


@pytest.fixture
def s3_secure(s3_secure_service: SecureS3Service) -> SecureS3:
    """The https S3 server (fails the test when it could not be started)."""
    return s3_secure_service.require()


@dataclass(frozen=True, slots=True)
class SecureEtcd:
    """etcd over TLS with client certificates required and auth on: its host and port, the
    test CA and the etcd client certificate, user ``nereus`` and its password file."""

    host: str
    port: int
    certs: Path
    user: str = "nereus"

    def cluster_settings(self, cluster: str, *, password_file: Path | None = None,
                         ca: bool = True) -> ClusterSettings:
        """A node's ``[cluster]`` for ``cluster`` on this server."""
        from nereus.config import ClusterSettings

        return ClusterSettings(
            coordinator=f"etcd://{self.host}:{self.port}/{cluster}", node_id="n1",
            tls_ca_file=str(self.certs / "ca.pem") if ca else None,
            tls_cert_file=str(self.certs / "etcd-client.pem"),
            tls_key_file=str(self.certs / "etcd-client.key"), username=self.user,
            password_file=str(password_file or self.certs / "etcd-password"))


SecureEtcdService = Service[SecureEtcd]


def _etcd_of(env: dict[str, str]) -> SecureEtcd:
    host, _, port = env["NEREUS_ETCD_SECURE_ENDPOINT"].removeprefix("https://").partition(":")
    return SecureEtcd(host=host, port=int(port), certs=Path(env["NEREUS_SECURE_CERTS"]))


@pytest.fixture(scope="session")
def etcd_secure_service() -> Iterator[SecureEtcdService]:
    """``etcd-secure`` up for the session (stopped only if this session started it)."""
    yield from session_service("etcd-secure", _starter(
        "etcd-secure", "etcd over TLS with auth", _etcd_of,
        needs="Needs etcd (scripts/services fetches it) and openssl"))


@pytest.fixture
def etcd_secure(etcd_secure_service: SecureEtcdService) -> SecureEtcd:
    """The secured etcd (fails the test when it could not be started)."""
    return etcd_secure_service.require()


@dataclass(frozen=True, slots=True)
class SecureOxia:
    """Oxia with TLS only on its public port and client certificates required: its host and
    port, the test CA and the client certificate (``oxia-server.pem`` names 127.0.0.1
    only, so ``localhost`` is a wrong server name)."""

    host: str
    port: int
    certs: Path

    def url(self, cluster: str, *, host: str | None = None) -> str:
        return f"oxia://{host or self.host}:{self.port}/{cluster}"

    def cluster_settings(self, cluster: str, *, host: str | None = None, ca: str | None = "ca.pem",
                         client: bool = True) -> ClusterSettings:
        """A node's ``[cluster]`` for ``cluster`` on this server (``ca``: the certificate
        directory's file to trust, None for none; ``client``: show client.pem)."""
        from nereus.config import ClusterSettings

        return ClusterSettings(
            coordinator=self.url(cluster, host=host), node_id="n1",
            tls_ca_file=str(self.certs / ca) if ca else None,
            tls_cert_file=str(self.certs / "client.pem") if client else None,
            tls_key_file=str(self.certs / "client.key") if client else None)


SecureOxiaService = Service[SecureOxia]


def _oxia_of(env: dict[str, str]) -> SecureOxia:
    host, _, port = env["NEREUS_OXIA_SECURE_ENDPOINT"].rpartition(":")
    return SecureOxia(host=host, port=int(port), certs=Path(env["NEREUS_SECURE_CERTS"]))


@pytest.fixture(scope="session")
def oxia_secure_service() -> Iterator[SecureOxiaService]:
    """``oxia-secure`` up for the session (stopped only if this session started it)."""
    yield from session_service("oxia-secure", _starter(
        "oxia-secure", "Oxia over TLS with client certificates", _oxia_of,
        needs="Needs Oxia (scripts/services builds it with Go) and openssl"))


@pytest.fixture
def oxia_secure(oxia_secure_service: SecureOxiaService) -> SecureOxia:
    """The secured Oxia (fails the test when it could not be started)."""
    return oxia_secure_service.require()


def schedule_acknowledged(home: Path, lane: str, count: int) -> list[str]:
    """``count`` messages scheduled on ``lane`` through the running engine, each waited for
    until applied (acknowledged); their ids."""
    from tests.conftest import run_nereus

    ids = []
    for n in range(count):
        queued = run_nereus("--json", "message", "schedule", "--lane", lane, "--delay", "1s",
                            "--payload", f"m{n}", "--wait", home=home)
        assert queued.code == 0, queued.stderr
        ids.append(queued.json()["delay_message_id"])
    return ids
