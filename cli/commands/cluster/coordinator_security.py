"""The options that reach a secured coordinator from the command line, where no node's home
says how (``cluster init --coordinator URL``, ``init --join URL``, and every command given
``--coordinator URL`` outside a node's home): TLS (etcd's https, Oxia's gRPC) with the CA of
its certificate and a client certificate, and etcd's own user and password (by reference).
They are the node's ``[cluster]`` settings of the same names, checked by the same rules
(``parse_config``), and ``init --join`` writes them into the home it makes (paths made
absolute), so the engine there connects the same way. ``takes_coordinator_security`` adds
them to a command that reaches the cluster through ``access.cluster_store``.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar, get_type_hints

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

    @classmethod
    def of(cls, cluster: ClusterSettings, *, home: Path) -> CoordinatorSecurity:
        """A node's ``[cluster]`` settings as these options (relative paths: the home's)."""
        def path(value: str | None) -> Path | None:
            return None if value is None else home / value

        return cls(tls_ca_file=path(cluster.tls_ca_file),
                   tls_cert_file=path(cluster.tls_cert_file),
                   tls_key_file=path(cluster.tls_key_file), username=cluster.username,
                   password_file=path(cluster.password_file),
                   password_env=cluster.password_env)

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


_OPTIONS: dict[str, object] = {  # each field above: its option
    "tls_ca_file": TlsCaOpt, "tls_cert_file": TlsCertOpt, "tls_key_file": TlsKeyOpt,
    "username": UsernameOpt, "password_file": PasswordFileOpt, "password_env": PasswordEnvOpt,
}
SETTINGS: Final = tuple(_OPTIONS)  # their [cluster] names, the same
_given: ContextVar[CoordinatorSecurity | None] = ContextVar("coordinator_security",
                                                            default=None)
Result = TypeVar("Result")


def given_security() -> CoordinatorSecurity | None:
    """What the running command's options above said (None outside such a command)."""
    return _given.get()


def takes_coordinator_security(command: Callable[..., Result]) -> Callable[..., Result]:
    """``command`` taking the options above as well (added to the signature Typer reads);
    while it runs, ``given_security()`` holds what they said, and ``access.cluster_store``
    uses it for the address it opens, so each command need not pass them along."""
    signature = inspect.signature(command, eval_str=True)
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation=annotation)
             for name, annotation in _OPTIONS.items()]

    @functools.wraps(command)
    def with_security(*args: object, **kwargs: Any) -> Result:  # Any: Typer's values
        token = _given.set(CoordinatorSecurity(**{name: kwargs.pop(name, None)
                                                  for name in _OPTIONS}))
        try:
            return command(*args, **kwargs)
        finally:
            _given.reset(token)

    with_security.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), *added])
    with_security.__annotations__ = {**get_type_hints(command, include_extras=True),
                                     **_OPTIONS}
    return with_security
