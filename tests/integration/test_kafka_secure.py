"""Kafka over TLS and SASL against a real secured broker (``scripts/services up
kafka-secure``): a ``[kafka.NAME]`` table written with librdkafka's names, named by a route
and a lane, carries TLS with a CA, mTLS, SCRAM-SHA-512 and PLAIN over TLS to the Shard Log
and the destination; a wrong password, a missing CA and a missing client certificate each
fail fast with an error naming the connection and what to fix; the password never shows.
OAUTHBEARER over OIDC (librdkafka fetching a signed JWT from the script's test token issuer
with a client id and secret, the broker checking it against the issuer's JWKS) carries the
Shard Log and the destination too; a wrong client secret is refused the same way.
The destination and Shard Log contracts run again over SCRAM, a few of their promises over
OAUTHBEARER (unsecured JWTs: the broker's default validator)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

import tests.integration.test_kafka_destination as plain_destination
import tests.integration.test_kafka_shardlog as plain_shardlog
from nereus.adapters.backends.destination.factory import open_destination
from nereus.adapters.backends.kafka.kafka_security import use_connections
from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.config import Config, parse_config
from nereus.records import Outcome
from nereus.shard import ShardId
from tests.integration.destination_contract import request, wanted
from tests.integration.secure_services import SecureKafka

pytestmark = pytest.mark.kafka  # a real broker's test (the fast lane leaves it out)

SESSION = uuid.uuid4().hex[:8]
TIMEOUT_S = 20.0


def connection_table(kafka: SecureKafka, home: Path, mechanism: str, *,
                     password: str | None = None, ca: bool = True,
                     client_cert: bool = True, scope: str = "nereus.write") -> str:
    """``[kafka.secure]`` as an operator writes it for ``mechanism`` (tls, mtls, scram,
    plain, oauth: an unsecured JWT of ``scope``, oidc: the test issuer's client with
    ``password`` as its secret); secrets are files of the home, 0600."""
    lines = ["[kafka.secure]"]
    secured = home / "secrets"
    if ca:  # a relative path is the home's
        kafka.private_copy(secured, "ca.pem")
        lines.append('ssl.ca.location = "secrets/ca.pem"')
    if mechanism in ("tls", "mtls"):
        lines += [f'bootstrap = "{kafka.tls if mechanism == "tls" else kafka.mtls}"',
                  'security.protocol = "SSL"']
        if mechanism == "mtls" and client_cert:
            lines += [f'ssl.certificate.location = "{kafka.private_copy(secured, "client.pem")}"',
                      f'ssl.key.location = "{kafka.private_copy(secured, "client.key")}"']
        return "\n".join(lines) + "\n"
    if mechanism == "oauth":
        lines += [f'bootstrap = "{kafka.oauth}"', 'security.protocol = "SASL_SSL"',
                  'sasl.mechanism = "OAUTHBEARER"', "enable.sasl.oauthbearer.unsecure.jwt = true",
                  f'sasl.oauthbearer.config = "principal={kafka.user} scope={scope}"']
        return "\n".join(lines) + "\n"
    if mechanism == "oidc":
        secret = secured / "oidc-secret"
        secret.write_text((password or kafka.oidc_client_secret) + "\n")
        secret.chmod(0o600)
        lines += [f'bootstrap = "{kafka.oidc}"', 'security.protocol = "SASL_SSL"',
                  'sasl.mechanism = "OAUTHBEARER"', 'https.ca.location = "secrets/ca.pem"',
                  f'sasl.oauthbearer.token.endpoint.url = "{kafka.oidc_token_url}"',
                  f'sasl.oauthbearer.client.id = "{kafka.user}"',
                  'sasl.oauthbearer.client.secret_file = "secrets/oidc-secret"']
        return "\n".join(lines) + "\n"
    password_file = secured / "kafka-password"
    password_file.write_text((password or kafka.password) + "\n")
    password_file.chmod(0o600)
    lines += [f'bootstrap = "{kafka.sasl}"', 'security.protocol = "SASL_SSL"',
              f'sasl.mechanism = "{"PLAIN" if mechanism == "plain" else "SCRAM-SHA-512"}"',
              f'sasl.username = "{kafka.user}"',
              'sasl.password_file = "secrets/kafka-password"']
    return "\n".join(lines) + "\n"


def secured_home(home: Path, table: str, topic: str) -> Config:
    """A home whose route and lane name ``[kafka.secure]``; its connections in use."""
    home.mkdir(parents=True, exist_ok=True)
    text = (table + f'\n[routes.default]\nlog = "kafka"\nkafka = "secure"\ntopic = "{topic}-log"\n'
            f'\n[lanes.out]\ndestination = "kafka"\nkafka = "secure"\ntopic = "{topic}"\n')
    config = parse_config(text, source=str(home / "nereus.toml"))
    use_connections(config.kafka.values(), home=home)
    return config


@pytest.mark.parametrize("mechanism", ["tls", "mtls", "scram", "plain", "oauth", "oidc"])
def test_each_mechanism_publishes_to_the_destination_and_finds_its_evidence(
        tmp_path: Path, kafka_secure: SecureKafka, mechanism: str) -> None:
    """TLS with a CA, mTLS, SCRAM-SHA-512, PLAIN over TLS and OAUTHBEARER over TLS (an
    unsecured JWT the broker's default validator accepts; OIDC: a signed JWT from the test
    issuer's token endpoint, checked against its JWKS): the lane's destination creates
    its topic, publishes one record and finds it again as evidence."""
    topic = f"nereus-secure-{SESSION}-{mechanism}"
    config = secured_home(tmp_path, connection_table(kafka_secure, tmp_path, mechanism), topic)
    destination = open_destination(config.lanes["out"], tmp_path)
    try:
        assert destination.probe() is None
        sent = request(f"a-{mechanism}")
        (result,) = destination.publish([sent], lambda: 0)
        assert result.outcome == Outcome.PUBLISHED, result
        found = destination.scan_evidence(wanted(sent), 0, 2**62)
        assert set(found) == {sent.attempt_id}
    finally:
        destination.close()


@pytest.mark.parametrize("mechanism", ["scram", "oauth", "oidc"])
def test_the_shard_log_appends_and_reads_over_sasl(tmp_path: Path, kafka_secure: SecureKafka,
                                                   mechanism: str) -> None:
    """A route naming a SASL_SSL connection (SCRAM-SHA-512, OAUTHBEARER with an unsecured
    JWT or over OIDC): its Command Topic
    is created, a record appended is read back at its receipt's position."""
    config = secured_home(tmp_path, connection_table(kafka_secure, tmp_path, mechanism),
                          f"nereus-secure-{SESSION}-{mechanism}-log")
    log = open_shard_log(config.routes["default"], ShardId("default", 0), tmp_path)
    try:
        (receipt,) = log.append([f"over {mechanism}".encode()])
        assert [r.payload for r in log.read(receipt.position, 10)] == \
            [f"over {mechanism}".encode()]
    finally:
        log.close()


@pytest.mark.parametrize(("mechanism", "change", "said", "fix"), [
    ("scram", {"password": "not-the-password"}, "authentication", "sasl.username"),
    ("tls", {"ca": False}, "certificate verify failed", "ssl.ca.location"),
    ("mtls", {"client_cert": False}, "certificate", "ssl.certificate.location"),
    ("oauth", {"scope": "nereus.read"}, "insufficient_scope", "sasl.oauthbearer.config"),
    ("oidc", {"password": "not-the-password"}, "invalid_client",
     "sasl.oauthbearer.client.secret_file"),
])
def test_a_refused_connection_names_the_connection_and_what_to_fix(
        tmp_path: Path, kafka_secure: SecureKafka, mechanism: str,
        change: dict[str, object], said: str, fix: str) -> None:
    """A wrong password, no CA, no client certificate, a token without the scope the broker
    requires, a wrong OIDC client secret (the token endpoint refuses it): the destination's
    probe says, within
    its deadline, that the broker refused ``[kafka.secure]`` and why (the password never
    shows); the Shard Log's open raises ServiceUnreachable (exit 5) with the fix as hint."""
    from nereus.errors import ExitCode, ServiceUnreachable

    table = connection_table(kafka_secure, tmp_path, mechanism, **change)  # type: ignore[arg-type]
    config = secured_home(tmp_path, table, f"nereus-secure-{SESSION}-refused")
    destination = open_destination(config.lanes["out"], tmp_path)
    try:
        problem = destination.probe()
    finally:
        destination.close()
    assert problem is not None and "refused the connection" in problem, problem
    assert "[kafka.secure]" in problem and said in problem.lower(), problem
    assert "not-the-password" not in problem
    with pytest.raises(ServiceUnreachable) as raised:
        open_shard_log(config.routes["default"], ShardId("default", 0), tmp_path).close()
    assert raised.value.exit_code == ExitCode.SERVICE_UNREACHABLE
    assert fix in (raised.value.hint or ""), raised.value.hint


def use_connection(kafka: SecureKafka, home: Path, mechanism: str) -> str:
    """``[kafka.secure]`` over ``mechanism`` in use for this process; its bootstrap."""
    config = parse_config(connection_table(kafka, home, mechanism),
                          source=str(home / "x.toml"))
    use_connections(config.kafka.values(), home=home)
    return config.kafka["secure"].bootstrap


def delete_topics(bootstrap: str, topics: set[str]) -> None:
    """Delete ``topics`` through our own (secured) admin client."""
    from nereus.adapters.backends.kafka.kafka_client import admin_client

    if topics:
        admin = admin_client(bootstrap, "nereus-test-cleanup")
        for future in admin.delete_topics(sorted(topics), operation_timeout=10).values():
            future.exception(10)  # a topic never created is fine


class _OverScram:
    """A contract's broker: the secured one, over SASL_SSL (SCRAM-SHA-512)."""

    mechanism = "scram"
    bootstrap: str
    topics: set[str]

    @pytest.fixture(autouse=True)
    def _broker(self, kafka_secure: SecureKafka, tmp_path: Path) -> Iterator[None]:
        self.bootstrap = use_connection(kafka_secure, tmp_path / "home", self.mechanism)
        self.topics = set()
        yield
        delete_topics(self.bootstrap, self.topics)


class _OverOauth(_OverScram):
    """... over SASL_SSL (OAUTHBEARER, an unsecured JWT with the scope the broker wants)."""

    mechanism = "oauth"


_Contract = TypeVar("_Contract", bound=type)


def only(*kept: str) -> Callable[[_Contract], _Contract]:
    """A contract class with only the tests ``kept`` (the others switched off): a few of
    its promises over a second mechanism, the whole contract running over SCRAM."""

    def narrow(contract: _Contract) -> _Contract:
        for name in dir(contract):
            if name.startswith("test_") and name not in kept:
                setattr(contract, name, None)  # not callable: pytest collects nothing
        return contract

    return narrow


class TestKafkaDestinationOverScram(_OverScram, plain_destination.TestKafkaDestination):
    """The whole destination contract over SASL_SSL (SCRAM-SHA-512) to the secured broker."""


class TestKafkaShardLogOverScram(_OverScram, plain_shardlog.TestKafkaShardLog):
    """The whole Shard Log contract over SASL_SSL (SCRAM-SHA-512) to the secured broker."""


@only("test_probe_passes_when_the_target_is_up",
      "test_published_results_carry_evidence_that_names_a_verifiable_record",
      "test_scan_evidence_finds_a_published_attempt_and_not_an_absent_one")
class TestKafkaDestinationOverOauth(_OverOauth, plain_destination.TestKafkaDestination):
    """The destination contract's publish, evidence and probe over SASL_SSL (OAUTHBEARER)."""


@only("test_append_returns_one_receipt_per_payload_with_consecutive_positions",
      "test_second_log_object_sees_the_records", "test_time_stays_monotonic_after_reopen")
class TestKafkaShardLogOverOauth(_OverOauth, plain_shardlog.TestKafkaShardLog):
    """The Shard Log contract's appends, reads and reopen over SASL_SSL (OAUTHBEARER)."""
