"""The options that reach a secured coordinator from the command line, before any node's
home says how (``cluster init --coordinator URL``, ``init --join URL``): TLS (etcd's https,
Oxia's gRPC) with the CA of its certificate and a client certificate, and etcd's own user and
password (by reference). They are the node's ``[cluster]`` settings of the same names,
checked by the same rules (``parse_config``), and ``init --join`` writes them into the home
it makes (paths made absolute), so the engine there connects the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from nereus.config import ClusterSettings

_SETTINGS = "a node's [cluster] setting of the same name (docs/security.md)"
TlsCaOpt = Annotated[Path | None, typer.Option(
    "--tls-ca-file", metavar="PATH", help="The coordinator over TLS (etcd: https; Oxia: gRPC "
    "over TLS): the CA of its certificate, the only one trusted; " + _SETTINGS + ".")]
TlsCertOpt = Annotated[Path | None, typer.Option(
    "--tls-cert-file", metavar="PATH", help="A client certificate (PEM) for a coordinator "
    "that requires one, with --tls-key-file.")]
TlsKeyOpt = Annotated[Path | None, typer.Option(
    "--tls-key-file", metavar="PATH", help="The client certificate's key (PEM).")]
UsernameOpt = Annotated[str | None, typer.Option(
    "--username", metavar="NAME", help="etcd's auth: the user (with --password-file or "
    "--password-env; Oxia has none).")]
PasswordFileOpt = Annotated[Path | None, typer.Option(
    "--password-file", metavar="PATH", help="etcd's auth: a file (mode 0600, yours) holding "
    "the user's password.")]
PasswordEnvOpt = Annotated[str | None, typer.Option(
    "--password-env", metavar="VAR", help="etcd's auth: the environment variable holding "
    "the user's password.")]


@dataclass(frozen=True, slots=True)
class CoordinatorSecurity:
    """What the options above gave (None: not given)."""

    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    username: str | None = None
    password_file: Path | None = None
    password_env: str | None = None

    @property
    def given(self) -> bool:
        return any(getattr(self, field.name) is not None for field in fields(self))

    def toml(self) -> str:
        """The ``[cluster]`` lines of what was given (paths absolute), one per setting."""
        lines = []
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None:
                text = str(value.absolute()) if isinstance(value, Path) else value
                lines.append(f"{field.name} = {json.dumps(text)}\n")
        return "".join(lines)

    def settings(self, url: str) -> ClusterSettings | None:
        """These options as a node's ``[cluster]`` for ``url``, checked as a node's file is
        (``ConfigError`` naming the setting); None when none was given."""
        from nereus.config import parse_config

        if not self.given:
            return None
        text = f"[cluster]\ncoordinator = {json.dumps(url)}\nnode_id = \"cli\"\n{self.toml()}"
        cluster = parse_config(text, source="the options --tls-*, --username, --password-*"
                               ).cluster
        assert cluster is not None
        return cluster
