"""An Oxia coordinator over TLS, found by the server's host and port.

A node's ``[cluster]`` says how to reach an ``oxia://`` coordinator securely: ``tls_ca_file``
(the CA of Oxia's certificate; the only one trusted, never the system store) and, when Oxia
requires client certificates (``--tls-client-auth``), ``tls_cert_file`` / ``tls_key_file``.
``use_oxia_security`` records that for the coordinator's address (wherever a home's
configuration is loaded, as ``use_etcd_security`` does for etcd); ``OxiaWire`` asks
``security_for`` when it starts and dials every server of that Oxia cluster (the shard
leaders too) with the same credentials. No settings: plaintext, as before. Oxia has no
user/password auth (only OIDC tokens, not supported here), so ``username`` is refused for an
``oxia://`` coordinator when the file is read (``nereus/config/parse.py``).

``tls_failure`` turns what gRPC says of a failed handshake into the setting to fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from nereus.adapters.home.tls_files import Holds, TlsFileMissing, tls_file
from nereus.coordination.errors import CoordinatorUnavailable

if TYPE_CHECKING:
    from nereus.config import ClusterSettings

DEFAULT_PORT: Final = 6648
# what gRPC's details say when the TLS handshake failed, and which setting to check then
_SERVER_NAME: Final = ("Hostname Verification", "Peer name", "not in peer certificate")
_UNTRUSTED: Final = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed")
_CLIENT_CERT: Final = ("CERTIFICATE_REQUIRED", "certificate required", "BAD_CERTIFICATE",
                       "bad certificate", "UNKNOWN_CA", "unknown ca")
_HANDSHAKE: Final = ("andshake failed", "SSL_ERROR", "TSI_")
# a TLS server that wants a client certificate closes a connection without one: gRPC then
# says only that it could not decrypt (or that the socket closed)
_NO_CLIENT_CERT: Final = ("TSI_DATA_CORRUPTED", "Socket closed")


@dataclass(frozen=True, slots=True)
class OxiaSecurity:
    """The TLS material of one Oxia cluster's clients."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    home: Path | None = None  # a relative path is the home's

    def credentials(self, grpc: Any, where: str) -> Any:
        """gRPC channel credentials trusting ``ca_file`` alone and showing the client
        certificate; ``CoordinatorUnavailable`` naming the setting when a file is missing,
        unreadable or not PEM (gRPC would say only "Failed to create security
        handshaker")."""
        return grpc.ssl_channel_credentials(
            root_certificates=self._read(self.ca_file, "tls_ca_file", where, "ca"),
            private_key=self._read(self.key_file, "tls_key_file", where, "key"),
            certificate_chain=self._read(self.cert_file, "tls_cert_file", where,
                                         "certificate"))

    def _read(self, value: str | None, setting: str, where: str, holds: Holds
              ) -> bytes | None:
        try:
            path = tls_file(f"[cluster] {setting}", value, self.home, holds=holds)
        except TlsFileMissing as exc:
            raise CoordinatorUnavailable(f"{where}: {exc.message}", hint=exc.hint) from None
        return None if path is None else Path(path).read_bytes()


_BY_ENDPOINT: dict[tuple[str, int], OxiaSecurity] = {}


def use_oxia_security(cluster: ClusterSettings, home: Path | None = None) -> None:
    """From now on, connections to ``cluster``'s Oxia use its TLS settings."""
    target = urlsplit(cluster.coordinator)
    if target.scheme != "oxia" or target.hostname is None:
        return
    security = OxiaSecurity(ca_file=cluster.tls_ca_file, cert_file=cluster.tls_cert_file,
                            key_file=cluster.tls_key_file, home=home)
    endpoint = (target.hostname, target.port or DEFAULT_PORT)
    if security.ca_file is not None or security.cert_file is not None:
        _BY_ENDPOINT[endpoint] = security
    else:
        _BY_ENDPOINT.pop(endpoint, None)


def security_for(host: str, port: int) -> OxiaSecurity | None:
    return _BY_ENDPOINT.get((host, port))


def tls_failure(details: str, security: OxiaSecurity | None) -> str | None:
    """The hint for a connection that failed in its TLS handshake (None: not a TLS
    failure, or none that a setting explains)."""
    if any(text in details for text in _SERVER_NAME):
        return ("Oxia's certificate does not name the host dialled: put a name or address "
                "its certificate holds in [cluster] coordinator")
    if any(text in details for text in _UNTRUSTED):
        return ("check [cluster] tls_ca_file: it must be the CA that signed Oxia's "
                "certificate (and the certificate must not have expired)")
    if any(text in details for text in _CLIENT_CERT):
        return ("Oxia refused this node's client certificate: check [cluster] tls_cert_file "
                "and tls_key_file (a certificate of a CA Oxia trusts)")
    if security is None:
        return ("is Oxia running and reachable? If it serves TLS, set [cluster] tls_ca_file "
                "(and tls_cert_file / tls_key_file when it requires client certificates)"
                if "Socket closed" in details else None)
    if security.cert_file is None and any(text in details for text in _NO_CLIENT_CERT):
        return ("Oxia closed the TLS connection: if it requires client certificates, set "
                "[cluster] tls_cert_file and tls_key_file")
    if any(text in details for text in _HANDSHAKE):
        return ("the TLS handshake with Oxia failed: check [cluster] tls_ca_file, and "
                "tls_cert_file / tls_key_file when Oxia requires client certificates")
    return None
