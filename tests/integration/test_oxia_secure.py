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
    ("CA file not there", "cannot read [cluster] tls_ca_file", "tls_ca_file"),
    ("wrong server name", "Hostname Verification", "[cluster] coordinator"),
    ("plaintext", "Socket closed", "tls_ca_file"),
])
def test_a_refused_connection_says_what_to_fix(tmp_path: Path, oxia_secure: SecureOxia,
                                               case: str, said: str, fix: str) -> None:
    """Each wrong TLS setup fails the first call within a second or so (never waiting out a
    deadline, never hanging) with exit 5, saying what TLS said, naming the connection and
    the [cluster] setting to check."""
    cluster = cluster_of(tmp_path)
    settings = {
        "no client certificate": lambda: oxia_secure.cluster_settings(cluster, client=False),
        "untrusted CA": lambda: oxia_secure.cluster_settings(cluster, ca="client.pem"),
        "no CA": lambda: oxia_secure.cluster_settings(cluster, ca=None),
        "CA file not there": lambda: oxia_secure.cluster_settings(cluster, ca="absent.pem"),
        "wrong server name": lambda: oxia_secure.cluster_settings(cluster, host="localhost"),
        "plaintext": lambda: oxia_secure.cluster_settings(cluster, ca=None, client=False),
    }[case]()
    use_oxia_security(settings)
    started = time.monotonic()
    with pytest.raises(CoordinatorUnavailable) as raised, \
            OxiaCoordinator.from_url(settings.coordinator) as coordinator:
        coordinator.put("k", b"v")
    assert time.monotonic() - started < 4.0, "waited out the 5 s deadline instead of failing"
    assert raised.value.exit_code == ExitCode.SERVICE_UNREACHABLE
    host = "localhost" if case == "wrong server name" else oxia_secure.host
    assert f"Oxia at {host}:{oxia_secure.port}" in raised.value.message, raised.value
    assert said in raised.value.message and fix in (raised.value.hint or ""), raised.value
