"""Each Pulsar cluster's TLS and authentication, found by its service or admin URL.

A ``[pulsar.NAME]`` table (``nereus.config.connections``) is named by routes and lanes;
``parse_config`` gives each its URLs. ``use_pulsar_connections`` (called wherever a home's
configuration is loaded) records the tables by both URLs, and every client of ours asks
here: ``client_options`` for a ``pulsar.Client`` (``pulsar_client.make_client``: the Shard
Log, destinations, evidence reads), ``admin_request_options`` for the admin REST calls
(topic creation, ``doctor``, the broker probe). A URL no table names is used as it is.

The token is read when a client is made (``adapters.home.secrets``); pulsar-client answers a
refused token or certificate only with a timeout, so ``refusal_hint`` says what to check.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nereus.adapters.home.secrets import read_secret
from nereus.adapters.home.tls_files import tls_file
from nereus.config.connections import PulsarConnection

# each connection in use, by both its URLs, with the home its relative paths are read from
_BY_URL: dict[str, tuple[PulsarConnection, Path | None]] = {}


def use_pulsar_connections(connections: Iterable[PulsarConnection],
                           home: Path | None = None) -> None:
    """From now on, clients of this process reach each connection's URLs with its settings."""
    for connection in connections:
        _BY_URL[connection.service_url.rstrip("/")] = (connection, home)
        if connection.admin_url is not None:
            _BY_URL[connection.admin_url.rstrip("/")] = (connection, home)


def connection_for(url: str) -> PulsarConnection | None:
    found = _BY_URL.get(url.rstrip("/"))
    return found[0] if found is not None else None


def _home(connection: PulsarConnection) -> Path | None:
    found = _BY_URL.get(connection.service_url.rstrip("/"))
    return found[1] if found is not None else None


def _files(connection: PulsarConnection) -> tuple[str | None, str | None, str | None]:
    """The CA, client certificate and key paths (a relative path is the home's)."""
    home, where = _home(connection), f"[pulsar.{connection.name}]"
    return (tls_file(f"{where} tls_trust_certs_file_path", connection.tls_trust_certs_file_path,
                     home),
            tls_file(f"{where} tls_certificate_file_path", connection.tls_certificate_file_path,
                     home, holds="certificate"),
            tls_file(f"{where} tls_private_key_file_path", connection.tls_private_key_file_path,
                     home, holds="key"))


def _token(connection: PulsarConnection) -> str | None:
    return read_secret(f"[pulsar.{connection.name}] token", file=connection.token_file,
                       env=connection.token_env, home=_home(connection))


def client_options(service_url: str) -> dict[str, Any]:
    """``pulsar.Client`` keyword arguments for ``service_url`` (TLS, token or certificate)."""
    connection = connection_for(service_url)
    if connection is None:
        return {}
    import pulsar

    options: dict[str, Any] = {}
    ca, certificate, key = _files(connection)
    if connection.tls:
        options.update(tls_trust_certs_file_path=ca,
                       tls_validate_hostname=connection.tls_validate_hostname,
                       tls_allow_insecure_connection=False)
    token = _token(connection)
    if token is not None:
        options["authentication"] = pulsar.AuthenticationToken(token)
    elif certificate is not None:
        options["authentication"] = pulsar.AuthenticationTLS(certificate, key)
    return options


def admin_request_options(admin_url: str) -> tuple[dict[str, str], ssl.SSLContext | None]:
    """(headers, TLS context) for an admin REST call to ``admin_url``."""
    connection = connection_for(admin_url)
    if connection is None:
        return {}, None
    context = None
    ca, certificate, key = _files(connection)
    if admin_url.startswith("https://"):
        context = ssl.create_default_context(cafile=ca)
        context.check_hostname = connection.tls_validate_hostname
        if certificate is not None:
            context.load_cert_chain(certificate, key)
    token = _token(connection)
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return headers, context


def refusal_hint(url: str) -> str | None:
    """What to check when a secured connection to ``url`` did not answer (a refused token
    or certificate looks like no answer to pulsar-client)."""
    connection = connection_for(url)
    if connection is None or not (connection.tls or connection.token_file
                                  or connection.token_env):
        return None
    credential = ("the client certificate (tls_certificate_file_path, "
                  "tls_private_key_file_path: signed by a CA the broker trusts)"
                  if connection.tls_certificate_file_path is not None else
                  "the token (token_file or token_env)")
    return (f"[pulsar.{connection.name}]: if the broker runs, check {credential}, "
            "tls_trust_certs_file_path (the CA of the broker's certificate) and that the "
            "certificates have not expired")
