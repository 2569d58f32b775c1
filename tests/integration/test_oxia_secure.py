"""The Oxia coordinator over TLS, against a real Oxia that requires client certificates
(``scripts/services up oxia-secure``): the whole Coordinator contract (notifications and
sessions included) with the test CA alone trusted and the client certificate shown; and
each way the connection can be set up wrong failing at once, naming the setting to fix
(exit 5), never a hang: no client certificate, an untrusted or missing CA, a CA file that
is not there, a host the server's certificate does not name, and plaintext."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from msgspec.structs import replace

from nereus.adapters.backends.coordination.oxia import OxiaCoordinator
from nereus.adapters.backends.coordination.oxia_security import use_oxia_security
from nereus.coordination import CoordinatorUnavailable
from nereus.errors import ExitCode
from tests.integration.coordinator_child import ChildOpener
from tests.integration.coordinator_contract import CoordinatorContract
from tests.integration.secure_services import SecureOxia

pytestmark = pytest.mark.oxia


def cluster_of(tmp_path: Path) -> str:
    return "secure-" + hashlib.blake2b(str(tmp_path).encode(), digest_size=8).hexdigest()


def open_secure_oxia(url: str) -> OxiaCoordinator:
    """The child processes' opener: the secured Oxia at ``url``, with the test's CA and
    client certificate (the certificate directory from NEREUS_SECURE_CERTS, set by the
    test)."""
    host, _, rest = url.removeprefix("oxia://").partition(":")
    port, _, cluster = rest.partition("/")
    oxia = SecureOxia(host=host, port=int(port), certs=Path(os.environ["NEREUS_SECURE_CERTS"]))
    use_oxia_security(oxia.cluster_settings(cluster))
    return OxiaCoordinator.from_url(url)


class TestOxiaCoordinatorOverTls(CoordinatorContract):
    """Every promise of the Coordinator contract holds over TLS with a client certificate."""

    @pytest.fixture(autouse=True)
    def _oxia(self, oxia_secure: SecureOxia, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        monkeypatch.setenv("NEREUS_SECURE_CERTS", str(oxia_secure.certs))
        self.oxia = oxia_secure
        use_oxia_security(oxia_secure.cluster_settings(cluster_of(tmp_path)))
        yield
        with self.make_coordinator(tmp_path) as coordinator:
            coordinator.delete_range("", "\U0010ffff")

    def make_coordinator(self, tmp_path: Path) -> OxiaCoordinator:
        return OxiaCoordinator.from_url(self.oxia.url(cluster_of(tmp_path)))

    def child_opener(self, tmp_path: Path) -> ChildOpener:
        return ChildOpener(f"{__name__}:open_secure_oxia", self.oxia.url(cluster_of(tmp_path)))


@pytest.mark.parametrize(("case", "said", "fix"), [
    ("no client certificate", "TSI_DATA_CORRUPTED", "tls_cert_file"),
    ("untrusted CA", "CERTIFICATE_VERIFY_FAILED", "tls_ca_file"),
    ("no CA", "CERTIFICATE_VERIFY_FAILED", "tls_ca_file"),
    ("CA file not there", "[cluster] tls_ca_file = ", "tls_ca_file"),
    ("key not PEM", "[cluster] tls_key_file = ", "tls_key_file"),
    ("wrong server name", "Hostname Verification", "[cluster] coordinator"),
    ("plaintext", "Socket closed", "tls_ca_file"),
])
def test_a_refused_connection_says_what_to_fix(tmp_path: Path, oxia_secure: SecureOxia,
                                               case: str, said: str, fix: str) -> None:
    """Each wrong TLS setup fails the first call for what TLS said (never by waiting out the
    deadline, never hanging) with exit 5, saying it, naming the connection and
    the [cluster] setting to check."""
    cluster = cluster_of(tmp_path)
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a key\n")
    settings = {
        "no client certificate": lambda: oxia_secure.cluster_settings(cluster, client=False),
        "untrusted CA": lambda: oxia_secure.cluster_settings(cluster, ca="client.pem"),
        "no CA": lambda: oxia_secure.cluster_settings(cluster, ca=None),
        "CA file not there": lambda: oxia_secure.cluster_settings(cluster, ca="absent.pem"),
        "key not PEM": lambda: replace(oxia_secure.cluster_settings(cluster),
                                       tls_key_file=str(not_pem)),
        "wrong server name": lambda: oxia_secure.cluster_settings(cluster, host="localhost"),
        "plaintext": lambda: oxia_secure.cluster_settings(cluster, ca=None, client=False),
    }[case]()
    use_oxia_security(settings)
    started = time.monotonic()
    with pytest.raises(CoordinatorUnavailable) as raised, \
            OxiaCoordinator.from_url(settings.coordinator) as coordinator:
        coordinator.put("k", b"v")
    # failing for what TLS said (checked below), not for the 5 s deadline, is what shows it
    # did not wait; the bound only catches a hang, with room for a busy machine
    assert time.monotonic() - started < 30.0, "hung instead of failing"
    assert raised.value.exit_code == ExitCode.SERVICE_UNREACHABLE
    host = "localhost" if case == "wrong server name" else oxia_secure.host
    assert f"Oxia at {host}:{oxia_secure.port}" in raised.value.message, raised.value
    assert said in raised.value.message and fix in (raised.value.hint or ""), raised.value


def test_refusals_from_a_nodes_home_name_the_setting_and_exit_5(
        tmp_path: Path, oxia_secure: SecureOxia) -> None:
    """``nereus --json cluster status`` from a node's home on the secured Oxia: an expired
    or untrusted client certificate, a CA that did not sign Oxia's certificate and a CA file
    that is not there each exit 5 within seconds naming the [cluster] setting to check, no
    traceback (as ``test_secure_failures`` shows for Kafka, Pulsar, etcd and S3)."""
    from tests.integration.test_secure_failures import certificate_cases, copied, refused, said

    certs = oxia_secure.certs

    def table(home: Path, ca: Path | None, cert: Path | None, key: Path | None) -> str:
        return (f'[cluster]\ncoordinator = "{oxia_secure.url(cluster_of(tmp_path))}"\n'
                f'node_id = "n1"\ntls_ca_file = "{ca or copied(certs, home, "ca.pem")}"\n'
                f'tls_cert_file = "{cert or copied(certs, home, "client.pem")}"\n'
                f'tls_key_file = "{key or copied(certs, home, "client.key")}"\n')

    expired, stranger, server, missing = certificate_cases(
        tmp_path, certs, ("expired", "stranger", "server", "missing"), table)
    refused([said(expired, "expired at", "point [cluster] tls_cert_file at"),
             said(stranger, "Oxia at", "tls_cert_file"),
             said(server, "CERTIFICATE_VERIFY_FAILED", "tls_ca_file"),
             said(missing, "no-such-ca.pem", "tls_ca_file")],
            tmp_path, "", "cluster", "status")


def test_an_expired_server_certificate_is_refused(tmp_path: Path) -> None:
    """An Oxia whose certificate (from the CA the home trusts) expired yesterday, played by
    a TLS listener of the test: ``cluster status`` exits 5 within seconds saying the
    certificate has expired and naming tls_ca_file (whose hint says to check the dates)."""
    from tests.integration.test_secure_failures import Case, homes, refused
    from tests.integration.throwaway_certs import expired_server

    homes(tmp_path, ["oxia"])
    with expired_server(tmp_path) as (port, ca):
        refused([Case("oxia", f'[cluster]\ncoordinator = "oxia://127.0.0.1:{port}/old"\n'
                      f'node_id = "n1"\ntls_ca_file = "{ca}"\n', "certificate has expired",
                      "tls_ca_file")], tmp_path, "", "cluster", "status")
