"""The etcd coordinator over TLS with etcd's auth, against a real etcd that requires client
certificates and has auth on (``scripts/services up etcd-secure``): the whole Coordinator
contract (watches included) as user ``nereus``; a wrong password and a missing CA each fail
fast, naming what to fix (exit 5)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.adapters.backends.coordination.etcd import EtcdAddress, EtcdCoordinator
from nereus.adapters.backends.coordination.etcd_security import use_etcd_security
from nereus.coordination import CoordinatorUnavailable
from nereus.errors import ExitCode
from tests.integration.coordinator_child import ChildOpener
from tests.integration.coordinator_contract import CoordinatorContract
from tests.integration.secure_services import SecureEtcd

pytestmark = pytest.mark.etcd


def cluster_of(tmp_path: Path) -> str:
    return "secure-" + hashlib.blake2b(str(tmp_path).encode(), digest_size=8).hexdigest()


def open_secure_etcd(url: str) -> EtcdCoordinator:
    """The child processes' opener: the secured etcd at ``url``, with the test's TLS and
    user (the certificate directory from NEREUS_SECURE_CERTS, set by the test)."""
    host, _, rest = url.removeprefix("etcd://").partition(":")
    port, _, cluster = rest.partition("/")
    etcd = SecureEtcd(host=host, port=int(port), certs=Path(os.environ["NEREUS_SECURE_CERTS"]))
    use_etcd_security(etcd.cluster_settings(cluster))
    return EtcdCoordinator.from_url(url)


class TestEtcdCoordinatorOverTls(CoordinatorContract):
    """Every promise of the Coordinator contract holds over TLS, as an authenticated user."""

    @pytest.fixture(autouse=True)
    def _etcd(self, etcd_secure: SecureEtcd, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        monkeypatch.setenv("NEREUS_SECURE_CERTS", str(etcd_secure.certs))
        self.etcd = etcd_secure
        use_etcd_security(etcd_secure.cluster_settings(cluster_of(tmp_path)))
        yield
        with self.make_coordinator(tmp_path) as coordinator:
            coordinator.delete_range("", "\U0010ffff")

    def make_coordinator(self, tmp_path: Path) -> EtcdCoordinator:
        return EtcdCoordinator(EtcdAddress(self.etcd.host, self.etcd.port, cluster_of(tmp_path)))

    def child_opener(self, tmp_path: Path) -> ChildOpener:
        return ChildOpener(f"{__name__}:open_secure_etcd",
                           EtcdAddress(self.etcd.host, self.etcd.port, cluster_of(tmp_path)).url)


@pytest.mark.parametrize(("change", "said", "fix"), [
    ("password", "authentication failed", "password_file"),
    ("ca", "CERTIFICATE_VERIFY_FAILED", "tls_ca_file"),
])
def test_a_refused_connection_says_what_to_fix(tmp_path: Path, etcd_secure: SecureEtcd,
                                               change: str, said: str, fix: str) -> None:
    """A wrong password, no CA: the first call fails at once with exit 5, saying what etcd
    or TLS said and which [cluster] setting to check; the password never shows."""
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password-of-nereus")
    wrong.chmod(0o600)
    settings = etcd_secure.cluster_settings(
        cluster_of(tmp_path), password_file=wrong if change == "password" else None,
        ca=change != "ca")
    use_etcd_security(settings)
    with pytest.raises(CoordinatorUnavailable) as raised, \
            EtcdCoordinator.from_url(settings.coordinator) as coordinator:
        coordinator.put("k", b"v")
    assert raised.value.exit_code == ExitCode.SERVICE_UNREACHABLE
    assert said in raised.value.message and fix in (raised.value.hint or ""), raised.value
    assert "not-the-password-of-nereus" not in raised.value.message
