"""The TLS files ``nereus.toml`` names for a connection (a CA, a client certificate, its
key), checked before a client is made: a file that is not there, cannot be read or is not
PEM is named with the setting that names it, exit 5 like a server that refuses us, rather
than left to a client library's own words (librdkafka's "ssl.ca.location failed: BIO lib",
an ``ssl`` module's bare "No such file or directory")."""

from __future__ import annotations

from pathlib import Path

from nereus.adapters.home.secrets import home_path
from nereus.errors import ServiceUnreachable


class TlsFileMissing(ServiceUnreachable):
    """A CA, certificate or key file a connection names is missing, unreadable or not PEM:
    nothing to wait for, the operator fixes the file or the setting."""


def tls_file(what: str, value: str | None, home: Path | None) -> str | None:
    """The path ``value`` (a relative one is the home's), checked to be a readable PEM file;
    ``what`` names the setting (``"[kafka.prod] ssl.ca.location"``)."""
    path = home_path(value, home)
    if path is None:
        return None
    hint = (f"fix {what} in nereus.toml: a PEM file readable by the engine's user (a "
            "relative path is the home's)")
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise TlsFileMissing(f"{what} = {path}: no such file", hint=hint) from None
    except OSError as exc:
        raise TlsFileMissing(f"{what} = {path} cannot be read: {exc.strerror}",
                             hint=hint) from None
    if b"-----BEGIN " not in data:
        raise TlsFileMissing(f"{what} = {path} is not a PEM file", hint=hint)
    return path
