"""``[kafka.NAME]`` and ``[pulsar.NAME]``: one cluster's connection, written once, named by
routes and lanes (``kafka = "NAME"``, ``pulsar = "NAME"``), and how a secret is given
anywhere in ``nereus.toml``.

Kafka's keys are librdkafka's own names (``security.protocol``, ``sasl.mechanism``,
``ssl.ca.location``, ...), written quoted or as TOML dotted keys (both read the same);
Pulsar's are pulsar-client's (``tls_trust_certs_file_path``, ``tls_validate_hostname``).

A secret is never a value of the file: a password, token or key is given as
``NAME_file = PATH`` (a file 0600 owned by the engine's user, read when a client is made)
or ``NAME_env = VAR`` (an environment variable of the engine). ``SECRET_REFUSED`` says why
an inline one is refused. Reading them is the shell's work (``adapters/home/secrets``).
"""

from __future__ import annotations

import re
from typing import Final, Literal

import msgspec

ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

SECRET_REFUSED: Final = ("a secret is not written in the file: give {key}_file = PATH "
                         "(a file 0600 owned by the engine's user) or {key}_env = NAME "
                         "(an environment variable of the engine)")


class KafkaConnection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[kafka.NAME]``: how to reach and authenticate to one Kafka cluster."""

    name: str = ""  # the table's name (filled in; not a key of the table)
    bootstrap: str  # host:port[,host:port...]
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = \
        msgspec.field(name="security.protocol", default="PLAINTEXT")
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = \
        msgspec.field(name="sasl.mechanism", default=None)
    sasl_username: str | None = msgspec.field(name="sasl.username", default=None)
    sasl_password_file: str | None = msgspec.field(name="sasl.password_file", default=None)
    sasl_password_env: str | None = msgspec.field(name="sasl.password_env", default=None)
    # OAUTHBEARER through an OIDC token endpoint (librdkafka's sasl.oauthbearer.method=oidc)
    oauth_client_id: str | None = msgspec.field(name="sasl.oauthbearer.client.id", default=None)
    oauth_secret_file: str | None = msgspec.field(name="sasl.oauthbearer.client.secret_file",
                                                  default=None)
    oauth_secret_env: str | None = msgspec.field(name="sasl.oauthbearer.client.secret_env",
                                                 default=None)
    oauth_token_url: str | None = msgspec.field(name="sasl.oauthbearer.token.endpoint.url",
                                                default=None)
    oauth_scope: str | None = msgspec.field(name="sasl.oauthbearer.scope", default=None)
    # the CA of the token endpoint's https certificate (librdkafka does not use ssl.ca.location
    # there); unset: the system's CAs
    https_ca_location: str | None = msgspec.field(name="https.ca.location", default=None)
    # ... or an unsecured JWT librdkafka makes itself (no signature; a broker with Kafka's
    # unsecured validator only: tests, never production), its claims in sasl.oauthbearer.config
    oauth_unsecure_jwt: bool = msgspec.field(name="enable.sasl.oauthbearer.unsecure.jwt",
                                             default=False)
    oauth_config: str | None = msgspec.field(name="sasl.oauthbearer.config", default=None)
    ssl_ca_location: str | None = msgspec.field(name="ssl.ca.location", default=None)
    ssl_certificate_location: str | None = msgspec.field(name="ssl.certificate.location",
                                                         default=None)
    ssl_key_location: str | None = msgspec.field(name="ssl.key.location", default=None)
    ssl_key_password_file: str | None = msgspec.field(name="ssl.key.password_file", default=None)
    ssl_key_password_env: str | None = msgspec.field(name="ssl.key.password_env", default=None)
    # "https" checks the broker's certificate names the host dialled; "none" does not
    ssl_endpoint_identification_algorithm: Literal["https", "none"] = \
        msgspec.field(name="ssl.endpoint.identification.algorithm", default="https")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


# the secrets of a [kafka.NAME] table: (the key an operator would write inline, the
# Struct's fields of its file and environment references)
KAFKA_SECRETS: Final = (
    ("sasl.password", "sasl_password_file", "sasl_password_env"),
    ("ssl.key.password", "ssl_key_password_file", "ssl_key_password_env"),
    ("sasl.oauthbearer.client.secret", "oauth_secret_file", "oauth_secret_env"),
)


class PulsarConnection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[pulsar.NAME]``: how to reach and authenticate to one Pulsar cluster."""

    name: str = ""  # the table's name (filled in; not a key of the table)
    service_url: str  # pulsar://HOST:6650 or pulsar+ssl://HOST:6651
    admin_url: str | None = None  # http(s)://HOST:PORT, the admin API (doctor, topic creation)
    tls_trust_certs_file_path: str | None = None  # the CA of the broker's certificate (PEM)
    tls_validate_hostname: bool = True  # the certificate must name the host dialled
    # a client certificate (mTLS, Pulsar's TLS authentication) instead of a token
    tls_certificate_file_path: str | None = None
    tls_private_key_file_path: str | None = None
    token_file: str | None = None  # a JWT, in a file 0600
    token_env: str | None = None  # a JWT, in an environment variable

    @property
    def tls(self) -> bool:
        return self.service_url.startswith("pulsar+ssl://")


PULSAR_SECRETS: Final = (("token", "token_file", "token_env"),)


def pulsar_problem(connection: PulsarConnection) -> tuple[str, str] | None:
    """(key, what is wrong) for settings that cannot work together; None when they can."""
    if not connection.service_url.startswith(("pulsar://", "pulsar+ssl://")):
        return "service_url", "expected pulsar://HOST:PORT or pulsar+ssl://HOST:PORT"
    token = connection.token_file is not None or connection.token_env is not None
    if token and not connection.tls:
        return "service_url", ("a token over pulsar:// travels in clear text: use "
                               "pulsar+ssl://HOST:6651")
    if token and connection.admin_url is not None and \
            not connection.admin_url.startswith("https://"):
        return "admin_url", "a token over http:// travels in clear text: use https://"
    if (connection.tls_certificate_file_path is None) != \
            (connection.tls_private_key_file_path is None):
        return "tls_certificate_file_path", ("a client certificate needs both "
                                             "tls_certificate_file_path and "
                                             "tls_private_key_file_path")
    if token and connection.tls_certificate_file_path is not None:
        return "token_file", "authenticate with a token or a client certificate, not both"
    return None


def flatten(table: dict[str, object], prefix: str = "") -> dict[str, object]:
    """A table whose dotted keys (``security.protocol = ...``, which TOML reads as nested
    tables) are one key each, as if written quoted."""
    flat: dict[str, object] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def connection_problem(connection: KafkaConnection) -> tuple[str, str] | None:
    """(key, what is wrong) for settings that cannot work together; None when they can."""
    if connection.sasl and connection.sasl_mechanism is None:
        return "sasl.mechanism", (f"security.protocol = \"{connection.security_protocol}\" "
                                  "needs sasl.mechanism = \"SCRAM-SHA-512\" (or PLAIN, "
                                  "SCRAM-SHA-256, OAUTHBEARER)")
    if connection.sasl_mechanism is not None and not connection.sasl:
        return "sasl.mechanism", ("sasl.mechanism needs security.protocol = \"SASL_SSL\" "
                                  "(or SASL_PLAINTEXT)")
    if connection.sasl_mechanism not in (None, "OAUTHBEARER") and (
            connection.sasl_username is None
            or (connection.sasl_password_file is None and connection.sasl_password_env is None)):
        return "sasl.username", (f"sasl.mechanism = \"{connection.sasl_mechanism}\" needs "
                                 "sasl.username and sasl.password_file (or sasl.password_env)")
    oauth = oauth_problem(connection)
    if oauth is not None:
        return oauth
    if (connection.ssl_certificate_location is None) != (connection.ssl_key_location is None):
        return "ssl.certificate.location", ("a client certificate needs both "
                                            "ssl.certificate.location and ssl.key.location")
    tls_keys = (connection.ssl_ca_location, connection.ssl_certificate_location)
    if not connection.tls and any(value is not None for value in tls_keys):
        return "security.protocol", ("ssl.* settings need security.protocol = \"SSL\" or "
                                     "\"SASL_SSL\"")
    return None


def oauth_problem(connection: KafkaConnection) -> tuple[str, str] | None:
    """(key, what is wrong) when OAUTHBEARER has no way to get a token, or two."""
    oidc, unsecured = connection.oauth_token_url is not None, connection.oauth_unsecure_jwt
    if connection.sasl_mechanism != "OAUTHBEARER":
        if oidc or unsecured:
            return "sasl.mechanism", ("sasl.oauthbearer.* settings need sasl.mechanism = "
                                      "\"OAUTHBEARER\"")
        return None
    if oidc == unsecured:
        return "sasl.oauthbearer.token.endpoint.url", (
            "OAUTHBEARER needs either sasl.oauthbearer.token.endpoint.url (OIDC, with "
            "sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret_file) or, against "
            "a test broker, enable.sasl.oauthbearer.unsecure.jwt = true -- not both")
    if connection.https_ca_location is not None and not oidc:
        return "https.ca.location", ("https.ca.location is the OIDC token endpoint's CA: it "
                                     "needs sasl.oauthbearer.token.endpoint.url")
    if unsecured and "principal=" not in (connection.oauth_config or ""):
        return "sasl.oauthbearer.config", ("an unsecured JWT needs sasl.oauthbearer.config = "
                                           "\"principal=NAME [scope=A,B]\"")
    return None
