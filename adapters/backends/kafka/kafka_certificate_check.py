"""Why a broker's certificate is refused, in words: librdkafka reports an expired (or not
yet valid, or misnamed) broker certificate only as "certificate verify failed", so when it
does, one TLS handshake with Python's ``ssl`` and the connection's CA asks for the reason
("certificate has expired"). Asked only on that error path, at most once a minute per
address, bounded by a short deadline; nothing is sent after the handshake."""

from __future__ import annotations

import socket
import ssl
import time
from typing import Final

_ASKED: dict[str, tuple[float, str | None]] = {}  # bootstrap -> (when, the reason found)
_FRESH_S: Final = 60.0
_DEADLINE_S: Final = 2.0


def certificate_problem(bootstrap: str, ca_file: str | None, check_hostname: bool) -> str | None:
    """Why a TLS client trusting ``ca_file`` (None: the system's CAs) refuses the first
    broker of ``bootstrap`` ("certificate has expired"), or None when it does not or cannot
    tell (no answer, another failure)."""
    now = time.monotonic()
    known = _ASKED.get(bootstrap)
    if known is not None and now - known[0] < _FRESH_S:
        return known[1]
    host, _, port = bootstrap.split(",", maxsplit=1)[0].strip().rpartition(":")
    host = host.strip("[]")
    reason: str | None = None
    try:
        context = ssl.create_default_context(cafile=ca_file)
        context.check_hostname = check_hostname
        with socket.create_connection((host, int(port)), timeout=_DEADLINE_S) as raw, \
                context.wrap_socket(raw, server_hostname=host):
            pass
    except ssl.SSLCertVerificationError as exc:
        reason = exc.verify_message
    except (OSError, ValueError):
        reason = None
    _ASKED[bootstrap] = (now, reason)
    return reason
