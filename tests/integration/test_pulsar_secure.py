"""Pulsar over TLS with token (JWT) authentication against a real secured standalone
(``scripts/services up pulsar-secure``): a ``[pulsar.NAME]`` table named by a route and a
lane carries ``pulsar+ssl://`` with the CA and hostname verification and the token (or a
client certificate) to the Shard Log, the destination and the admin API; a wrong token and
a missing CA fail within their deadline naming the connection and what to check."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from nereus.adapters.backends.destination.factory import open_destination
from nereus.adapters.backends.pulsar.pulsar_security import use_pulsar_connections
from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.config import Config, parse_config
from nereus.records import Outcome
from nereus.shard import ShardId
from tests.integration.destination_contract import request, wanted
from tests.integration.secure_services import SecurePulsar

pytestmark = pytest.mark.pulsar

SESSION = uuid.uuid4().hex[:8]


def connection_table(pulsar: SecurePulsar, home: Path, *, token: str | None = None,
                     ca: bool = True, certificate: bool = False) -> str:
    """``[pulsar.secure]`` as an operator writes it; the token a 0600 file of the home."""
    secrets = home / "secrets"
    lines = ["[pulsar.secure]", f'service_url = "{pulsar.service_url}"',
             f'admin_url = "{pulsar.admin_url}"']
    if ca:  # a relative path is the home's
        pulsar.private_copy(secrets, "ca.pem")
        lines.append('tls_trust_certs_file_path = "secrets/ca.pem"')
    if certificate:
        lines += [f'tls_certificate_file_path = "{pulsar.private_copy(secrets, "client.pem")}"',
                  f'tls_private_key_file_path = "{pulsar.private_copy(secrets, "client.key")}"']
        return "\n".join(lines) + "\n"
    secrets.mkdir(parents=True, exist_ok=True)
    (secrets / "pulsar-token").write_text((token or pulsar.token) + "\n")
    (secrets / "pulsar-token").chmod(0o600)
    return "\n".join([*lines, 'token_file = "secrets/pulsar-token"']) + "\n"


def secured_home(home: Path, table: str, name: str) -> Config:
    """A home whose route and lane name ``[pulsar.secure]``; its connections in use."""
    home.mkdir(parents=True, exist_ok=True)
    text = (table + f'\n[routes.default]\nlog = "pulsar"\npulsar = "secure"\n'
            f'topic = "nereus-secure-{SESSION}-{name}-log"\n'
            f'\n[lanes.out]\ndestination = "pulsar"\npulsar = "secure"\n'
            f'topic = "nereus-secure-{SESSION}-{name}"\n')
    config = parse_config(text, source=str(home / "nereus.toml"))
    use_pulsar_connections(config.pulsar.values(), home=home)
    return config


@pytest.mark.parametrize("auth", ["token", "certificate"])
def test_the_destination_publishes_over_tls_and_finds_its_evidence(
        tmp_path: Path, pulsar_secure: SecurePulsar, auth: str) -> None:
    """pulsar+ssl:// with the CA and hostname verification, authenticated by a token or a
    client certificate: one record published, found again as evidence."""
    config = secured_home(tmp_path, connection_table(
        pulsar_secure, tmp_path, certificate=auth == "certificate"), auth)
    destination = open_destination(config.lanes["out"], tmp_path)
    try:
        assert destination.probe() is None
        sent = request(f"a-{auth}")
        (result,) = destination.publish([sent], lambda: 0)
        assert result.outcome == Outcome.PUBLISHED, result
        assert set(destination.scan_evidence(wanted(sent), 0, 2**62)) == {sent.attempt_id}
    finally:
        destination.close()


def test_the_shard_log_creates_its_topic_over_https_and_appends_over_tls(
        tmp_path: Path, pulsar_secure: SecurePulsar) -> None:
    """The Command Topic is created through the https admin API with the token; a record
    appended over pulsar+ssl:// is read back."""
    config = secured_home(tmp_path, connection_table(pulsar_secure, tmp_path), "log")
    log = open_shard_log(config.routes["default"], ShardId("default", 0), tmp_path)
    try:
        (receipt,) = log.append([b"over tls"])
        assert [r.payload for r in log.read(receipt.position, 10)] == [b"over tls"]
    finally:
        log.close()


@pytest.mark.parametrize(("change", "said"), [
    ({"token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJuZXJldXMifQ.bm90LXRoZS1zaWduYXR1cmU"},
     "401 Unauthorized"),
    ({"ca": False}, "CERTIFICATE_VERIFY_FAILED"),
])
def test_a_refused_connection_names_the_connection(tmp_path: Path,
                                                   pulsar_secure: SecurePulsar,
                                                   change: dict[str, object],
                                                   said: str) -> None:
    """A token signed with another key, no CA: opening the Shard Log (its admin call comes
    first) raises ServiceUnreachable (exit 5) saying what the server said, with a hint
    naming [pulsar.secure]; the token never shows."""
    from nereus.errors import ServiceUnreachable

    table = connection_table(pulsar_secure, tmp_path, **change)  # type: ignore[arg-type]
    config = secured_home(tmp_path, table, "refused")
    with pytest.raises(ServiceUnreachable) as raised:
        open_shard_log(config.routes["default"], ShardId("default", 0), tmp_path).close()
    shown = raised.value.message + (raised.value.hint or "")
    assert said in shown and "[pulsar.secure]" in (raised.value.hint or ""), shown
    assert "bm90LXRoZS1zaWduYXR1cmU" not in shown


def test_doctor_names_a_refused_token_and_what_to_check(tmp_path: Path,
                                                        pulsar_secure: SecurePulsar) -> None:
    """``nereus doctor`` on a home whose [pulsar.secure] token is refused: the admin API's
    check fails with its 401 and a fix naming [pulsar.secure]; the token never shows."""
    from tests.conftest import run_nereus

    home = tmp_path / "home"
    forged = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJuZXJldXMifQ.Zm9yZ2VkLXNpZ25hdHVyZQ"
    table = connection_table(pulsar_secure, home, token=forged)
    (home / "nereus.toml").write_text(
        table + f'\n[lanes.pout]\ndestination = "pulsar"\npulsar = "secure"\n'
        f'topic = "nereus-secure-{SESSION}-doctor"\n')
    home.chmod(0o700)
    doctor = run_nereus("--json", "doctor", home=home, timeout=90)
    assert doctor.code == 1, doctor.stderr
    check = {c["name"]: c for c in doctor.json()["checks"]}[f"pulsar {pulsar_secure.admin_url}"]
    assert not check["ok"] and "401 Unauthorized" in check["detail"], check
    assert "[pulsar.secure]" in check["fix"], check
    assert forged not in doctor.stdout + doctor.stderr
