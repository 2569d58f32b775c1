"""Each Kafka cluster's TLS and authentication settings, found by its bootstrap address.

A ``[kafka.NAME]`` table (``nereus.config.connections``) is written once and named by the
routes and lanes that use it; ``parse_config`` gives each of them the table's bootstrap.
``use_connections`` (called wherever a home's configuration is loaded) records the tables
by bootstrap, and every client of ours (``kafka_client.client_config``, ``admin_client``,
the probe) asks ``security_settings`` for the librdkafka settings of the address it dials:
the Shard Log, the destinations, evidence reads and ``doctor`` all speak the same way to
one cluster without each carrying the table. An address no table names is PLAINTEXT.

Secrets are read when a client is made (``adapters.home.secrets``), never kept in the
configuration value; an error from a secured broker is worded by ``refusal`` so that it
names the connection and what to fix.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from nereus.adapters.home.secrets import home_path, read_secret, redact
from nereus.adapters.home.tls_files import Holds, tls_file
from nereus.config.connections import KafkaConnection
from nereus.errors import ServiceUnreachable

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

# each connection in use with the home its relative paths are read from
_BY_BOOTSTRAP: dict[str, tuple[KafkaConnection, Path | None]] = {}
# the last refusal a client of this process met per bootstrap: (when, librdkafka name, text)
_REFUSED: dict[str, tuple[float, str, str]] = {}
_REFUSAL_FRESH_S: Final = 60.0

# librdkafka error names a secured connection fails with, and what each asks the operator
AUTH_ERRORS: Final = {
    "_AUTHENTICATION": "check sasl.username and the password its sasl.password_file (or "
                       "sasl.password_env) gives, and sasl.mechanism",
    "SASL_AUTHENTICATION_FAILED": "check sasl.username, the password and sasl.mechanism",
    "_SSL": "check ssl.ca.location (the CA that signed the broker's certificate), the client "
            "certificate and key (ssl.certificate.location, ssl.key.location) and that the "
            "certificates have not expired",
    "TOPIC_AUTHORIZATION_FAILED": "grant this user access to the topic (kafka-acls)",
    "CLUSTER_AUTHORIZATION_FAILED": "grant this user the cluster operation (kafka-acls)",
}
# ... and an authentication failure of OAUTHBEARER (a token the broker did not accept)
OAUTH_FIX: Final = ("check the token's principal and scope (sasl.oauthbearer.config for an "
                    "unsecured JWT) against what the broker requires")
# ... of OIDC (no token from the endpoint, or one the broker did not accept)
OIDC_FIX: Final = ("check sasl.oauthbearer.client.id and the client secret its "
                   "sasl.oauthbearer.client.secret_file (or sasl.oauthbearer.client.secret_env) "
                   "gives, sasl.oauthbearer.token.endpoint.url and https.ca.location (the CA "
                   "of the token endpoint's certificate), and sasl.oauthbearer.scope against "
                   "what the broker requires")


class KafkaRefused(ServiceUnreachable):
    """A broker answered and refused us: a wrong password, an untrusted or missing
    certificate. Nothing to wait for: the operator fixes the connection's settings."""


def use_connections(connections: Iterable[KafkaConnection], home: Path | None = None) -> None:
    """From now on, clients of this process dial each connection's bootstrap with its
    settings (a later configuration's table for the same address replaces the earlier)."""
    for connection in connections:
        _BY_BOOTSTRAP[connection.bootstrap] = (connection, home)


def connection_for(bootstrap: str) -> KafkaConnection | None:
    found = _BY_BOOTSTRAP.get(bootstrap)
    return found[0] if found is not None else None


def security_settings(bootstrap: str) -> dict[str, str]:
    """The librdkafka settings (secrets read now) for a client dialling ``bootstrap``."""
    found = _BY_BOOTSTRAP.get(bootstrap)
    if found is None:
        return {}
    connection, home = found
    files: tuple[tuple[str, str | None, Holds], ...] = (
        ("ssl.ca.location", connection.ssl_ca_location, "ca"),
        ("ssl.certificate.location", connection.ssl_certificate_location, "certificate"),
        ("ssl.key.location", connection.ssl_key_location, "key"),
        ("https.ca.location", connection.https_ca_location, "ca"))
    for key, value, holds in files:  # else librdkafka's words
        tls_file(f"[kafka.{connection.name}] {key}", value, home, holds=holds)
    return librdkafka_settings(connection, home)


def librdkafka_settings(connection: KafkaConnection, home: Path | None) -> dict[str, str]:
    where = f"[kafka.{connection.name}]"
    settings = {"security.protocol": connection.security_protocol.lower()}
    plain = {
        "sasl.mechanism": connection.sasl_mechanism,
        "sasl.username": connection.sasl_username,
        "ssl.ca.location": home_path(connection.ssl_ca_location, home),
        "ssl.certificate.location": home_path(connection.ssl_certificate_location, home),
        "ssl.key.location": home_path(connection.ssl_key_location, home),
        "sasl.oauthbearer.client.id": connection.oauth_client_id,
        "sasl.oauthbearer.token.endpoint.url": connection.oauth_token_url,
        "sasl.oauthbearer.scope": connection.oauth_scope,
        "https.ca.location": home_path(connection.https_ca_location, home),
        "sasl.oauthbearer.config": connection.oauth_config,
    }
    settings.update({key: value for key, value in plain.items() if value is not None})
    if connection.tls:
        settings["ssl.endpoint.identification.algorithm"] = \
            connection.ssl_endpoint_identification_algorithm
    if connection.oauth_token_url is not None:
        settings["sasl.oauthbearer.method"] = "oidc"
    if connection.oauth_unsecure_jwt:
        settings["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
    secrets = {
        "sasl.password": (connection.sasl_password_file, connection.sasl_password_env),
        "ssl.key.password": (connection.ssl_key_password_file, connection.ssl_key_password_env),
        "sasl.oauthbearer.client.secret": (connection.oauth_secret_file,
                                           connection.oauth_secret_env),
    }
    for key, (file, env) in secrets.items():
        value = read_secret(f"{where} {key}", file=file, env=env, home=home)
        if value is not None:
            settings[key] = value
    return settings


def error_callback(bootstrap: str) -> Callable[[KafkaError], None]:
    """A client's ``error_cb``: remembers an authentication or TLS refusal of ``bootstrap``
    (librdkafka reports it there; the call that failed only says "transport failure")."""

    def record(error: KafkaError) -> None:
        name, text = error.name(), error.str()
        if name not in AUTH_ERRORS and "SSL" in text:
            name = "_SSL"  # the broker refused our certificate ("alert bad certificate")
        if name in AUTH_ERRORS:
            _REFUSED[bootstrap] = (time.monotonic(), name, text)

    return record


def forget_refusal(bootstrap: str) -> None:
    """``bootstrap`` answered: an earlier refusal no longer explains a failure."""
    _REFUSED.pop(bootstrap, None)


def refusal(bootstrap: str, doing: str) -> KafkaRefused | None:
    """The error for a client of this process that ``bootstrap`` refused lately (an
    authentication or a TLS failure, remembered by ``error_callback``), else None: it
    names the connection, what the broker said, and what to fix."""
    found = _REFUSED.get(bootstrap)
    if found is None or time.monotonic() - found[0] > _REFUSAL_FRESH_S:
        return None
    _, name, text = found
    connection = connection_for(bootstrap)
    where = f"[kafka.{connection.name}]" if connection is not None else \
        "no [kafka.NAME] table names this address"
    fix = AUTH_ERRORS[name]
    if connection is not None and connection.sasl_mechanism == "OAUTHBEARER" and \
            name in ("_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"):
        fix = OIDC_FIX if connection.oauth_token_url is not None else OAUTH_FIX
    if connection is not None and "certificate verify failed" in text:
        from nereus.adapters.backends.kafka.kafka_certificate_check import certificate_problem

        reason = certificate_problem(
            bootstrap, home_path(connection.ssl_ca_location, _BY_BOOTSTRAP[bootstrap][1]),
            connection.ssl_endpoint_identification_algorithm == "https")
        if reason is not None:  # librdkafka does not say why
            text += f" (the broker's certificate: {reason})"
    return KafkaRefused(f"Kafka at {bootstrap} ({where}) refused the connection "
                        f"({doing}): {redact(text)}", hint=f"{fix} in {where}")
