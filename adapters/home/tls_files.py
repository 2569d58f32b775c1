"""The TLS files ``nereus.toml`` names for a connection (a CA, a client certificate, its
key), checked before a client is made: a file that is not there, cannot be read or is not
PEM is named with the setting that names it, exit 5 like a server that refuses us, rather
than left to a client library's own words (librdkafka's "ssl.ca.location failed: BIO lib",
an ``ssl`` module's bare "No such file or directory"). So is a client certificate out of
its dates (expired, or not valid yet), and a CA file none of whose certificates is valid
now: the server would answer only "certificate unknown" or "bad certificate"."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from nereus.adapters.home.secrets import home_path
from nereus.errors import ServiceUnreachable

if TYPE_CHECKING:
    from cryptography import x509


class TlsFileMissing(ServiceUnreachable):
    """A CA, certificate or key file a connection names is missing, unreadable, not PEM or
    out of its dates: nothing to wait for, the operator fixes the file or the setting."""


Holds = Literal["ca", "certificate", "key"]


def tls_file(what: str, value: str | None, home: Path | None, *,
             holds: Holds = "ca") -> str | None:
    """The path ``value`` (a relative one is the home's), checked to be a readable PEM file;
    ``what`` names the setting (``"[kafka.prod] ssl.ca.location"``). A ``certificate``'s
    first certificate, and at least one of a ``ca`` file's, must be valid now."""
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
    if holds != "key":
        _check_dates(what, path, data, holds, datetime.now(UTC))
    return path


def valid_until(path: str, holds: Holds, now: datetime) -> datetime | None:
    """When the file's certificate (its first), or the last to expire of a CA file's
    certificates valid at ``now``, expires; None when none can be read or is valid now."""
    valid = [c for c in _judged(Path(path).read_bytes(), holds)
             if c.not_valid_before_utc <= now <= c.not_valid_after_utc]
    return max((c.not_valid_after_utc for c in valid), default=None)


def _judged(data: bytes, holds: Holds) -> list[x509.Certificate]:
    """The certificates whose dates count: a certificate file's first, a CA file's all."""
    from cryptography import x509

    try:
        certificates = x509.load_pem_x509_certificates(data)
    except ValueError:
        return []
    return certificates[:1] if holds == "certificate" else certificates


def _check_dates(what: str, path: str, data: bytes, holds: Holds, now: datetime) -> None:
    """``TlsFileMissing`` when the certificate (its first), or every certificate of a CA
    file, is not valid at ``now``; a file whose certificates cannot be read here is left to
    the client's own check."""
    judged = _judged(data, holds)
    if not judged or any(c.not_valid_before_utc <= now <= c.not_valid_after_utc for c in judged):
        return
    first = judged[0]
    subject = first.subject.rfc4514_string() or "no subject"
    if holds == "ca" and len(judged) > 1:
        why = f"none of its {len(judged)} certificates is valid now"
    elif now < first.not_valid_before_utc:
        why = (f"its certificate ({subject}) is not valid before "
               f"{first.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ}; is this host's clock right?")
    else:
        why = (f"its certificate ({subject}) expired at "
               f"{first.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}")
    raise TlsFileMissing(f"{what} = {path}: {why}",
                         hint=f"renew it, or point {what} at a certificate valid now")
