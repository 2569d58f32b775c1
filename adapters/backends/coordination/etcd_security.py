"""An etcd coordinator over TLS with etcd's own auth, found by the server's host and port.

A node's ``[cluster]`` says how to reach its coordinator securely (``tls_ca_file``, a client
certificate ``tls_cert_file`` / ``tls_key_file``, ``username`` and ``password_file`` or
``password_env``); ``use_etcd_security`` records that for the coordinator's address
(wherever a home's configuration is loaded), and the gateway and the watch streams
(``etcd_wire``, ``etcd_watch``) ask ``security_for`` when they connect: https with the CA
(only the CA configured: ``REQUESTS_CA_BUNDLE`` and the like do not replace it), the client
certificate, and a token from ``/v3/auth/authenticate`` in every request's
``Authorization`` header (asked again when etcd says it is no longer valid).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from nereus.adapters.home.secrets import read_secret

if TYPE_CHECKING:
    import requests

    from nereus.adapters.home.tls_files import Holds
    from nereus.config import ClusterSettings

TOKEN_EXPIRED: Final = ("invalid auth token", "user name is empty")


@dataclass(frozen=True, slots=True)
class EtcdSecurity:
    """How to reach one etcd server: TLS material and the user it authenticates as."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    password_env: str | None = None
    home: Path | None = None

    @property
    def tls(self) -> bool:
        return self.ca_file is not None or self.cert_file is not None

    def password(self) -> str | None:
        return read_secret("[cluster] password", file=self.password_file,
                           env=self.password_env, home=self.home)

    def ssl_context(self, where: str) -> ssl.SSLContext:
        self.check_files(where)
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file is not None and self.key_file is not None:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def check_files(self, where: str) -> None:
        """``CoordinatorUnavailable`` naming the setting when a TLS file is missing,
        unreadable, not PEM or out of its dates (``tls_file``); ``where``: the server."""
        from nereus.adapters.home.tls_files import TlsFileMissing, tls_file
        from nereus.coordination.errors import CoordinatorUnavailable

        files: tuple[tuple[str, str | None, Holds], ...] = (
            ("tls_ca_file", self.ca_file, "ca"), ("tls_cert_file", self.cert_file, "certificate"),
            ("tls_key_file", self.key_file, "key"))
        try:
            for setting, value, holds in files:
                tls_file(f"[cluster] {setting}", value, self.home, holds=holds)
        except TlsFileMissing as exc:
            raise CoordinatorUnavailable(f"{where}: {exc.message}", hint=exc.hint) from None

    def session(self, where: str) -> requests.Session:
        """A requests session that verifies with this CA alone and shows the certificate."""
        import requests

        self.check_files(where)
        session = requests.Session()
        if self.tls:
            session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the configured CA
            session.verify = self.ca_file or True
            if self.cert_file is not None and self.key_file is not None:
                session.cert = (self.cert_file, self.key_file)
        return session


_BY_ENDPOINT: dict[tuple[str, int], EtcdSecurity] = {}


def use_etcd_security(cluster: ClusterSettings, home: Path | None = None) -> None:
    """From now on, connections to ``cluster``'s etcd use its TLS and auth settings."""
    target = urlsplit(cluster.coordinator)
    if target.scheme != "etcd" or target.hostname is None:
        return
    security = EtcdSecurity(ca_file=cluster.tls_ca_file, cert_file=cluster.tls_cert_file,
                            key_file=cluster.tls_key_file, username=cluster.username,
                            password_file=cluster.password_file,
                            password_env=cluster.password_env, home=home)
    if security.tls or security.username is not None:
        _BY_ENDPOINT[(target.hostname, target.port or 2379)] = security


def security_for(host: str, port: int) -> EtcdSecurity | None:
    return _BY_ENDPOINT.get((host, port))
