"""An Oxia coordinator's TLS settings: what a node's [cluster] may say for Oxia, which
connections get TLS, and which setting a failed handshake points at (the real handshakes
are in tests/integration/test_oxia_secure.py)."""

from __future__ import annotations

import pytest

from nereus.adapters.backends.coordination.oxia_security import (
    OxiaSecurity,
    security_for,
    tls_failure,
    use_oxia_security,
)
from nereus.config import ClusterSettings, parse_config
from nereus.errors import ConfigError


def test_a_user_and_password_are_refused_for_oxia() -> None:
    """Oxia has no user/password auth: [cluster] username for an oxia:// coordinator is
    refused, naming the TLS settings Oxia does take."""
    with pytest.raises(ConfigError) as raised:
        parse_config('[cluster]\ncoordinator = "oxia://h:6648/c"\nnode_id = "n"\n'
                     'username = "u"\npassword_env = "PW"\n')
    assert "username" in str(raised.value) and "tls_ca_file" in str(raised.value)


def test_tls_is_used_only_for_the_coordinators_address_and_only_when_asked() -> None:
    """A CA (or a client certificate) makes the coordinator's host and port TLS; other
    addresses, and the same one once the settings are gone, stay plaintext."""
    secured = ClusterSettings(coordinator="oxia://oxia-a:7001/c", node_id="n",
                              tls_ca_file="/ca.pem", tls_cert_file="/c.pem",
                              tls_key_file="/c.key")
    use_oxia_security(secured)
    assert security_for("oxia-a", 7001) == OxiaSecurity("/ca.pem", "/c.pem", "/c.key")
    assert security_for("oxia-a", 6648) is None
    use_oxia_security(ClusterSettings(coordinator="oxia://oxia-a:7001/c", node_id="n"))
    assert security_for("oxia-a", 7001) is None
    use_oxia_security(ClusterSettings(coordinator="etcd://oxia-b:2379/c", node_id="n",
                                      tls_ca_file="/ca.pem"))
    assert security_for("oxia-b", 2379) is None


@pytest.mark.parametrize(("details", "security", "fix"), [
    ("Hostname Verification Check failed.", OxiaSecurity("/ca.pem"), "[cluster] coordinator"),
    ("SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED", OxiaSecurity("/ca.pem"), "tls_ca_file"),
    ("Unwrap failed (TSI_DATA_CORRUPTED)", OxiaSecurity("/ca.pem"), "tls_cert_file"),
    ("Tls handshake failed (TSI_PROTOCOL_FAILURE)", OxiaSecurity("/ca.pem", "/c", "/k"),
     "tls_ca_file"),
    ("Socket closed", None, "tls_ca_file"),
])
def test_a_failed_handshake_names_the_setting_to_fix(details: str, security: OxiaSecurity | None,
                                                     fix: str) -> None:
    """What gRPC says of a failed TLS connection becomes a hint naming the setting."""
    assert fix in (tls_failure(details, security) or "")


def test_an_unreachable_server_is_not_called_a_tls_failure() -> None:
    """A refused connection gets no TLS hint (the caller says: is Oxia running?)."""
    assert tls_failure("Connection refused", OxiaSecurity("/ca.pem")) is None
    assert tls_failure("Connection refused", None) is None
