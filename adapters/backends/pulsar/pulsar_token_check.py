"""Whether a Pulsar broker that "did not answer" refused our token: pulsar-client answers a
refused token only with a timeout, so on that error path, for a connection with a token and
an admin URL, one admin call with the same token tells the two apart (401 Unauthorized).
Asked at most once a minute per connection, bounded by a short deadline."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Final

from nereus.adapters.backends.pulsar.pulsar_security import admin_request_options, connection_for

_ASKED: dict[str, tuple[float, bool]] = {}  # admin URL -> (when, refused)
_FRESH_S: Final = 60.0
_DEADLINE_S: Final = 2.0


def token_refused(service_url: str) -> bool:
    """True when the admin API of ``service_url``'s connection refuses its token (401)."""
    connection = connection_for(service_url)
    if connection is None or connection.admin_url is None or (
            connection.token_file is None and connection.token_env is None):
        return False
    admin_url = connection.admin_url.rstrip("/")
    now = time.monotonic()
    known = _ASKED.get(admin_url)
    if known is not None and now - known[0] < _FRESH_S:
        return known[1]
    refused = False
    try:
        headers, context = admin_request_options(admin_url)
        request = urllib.request.Request(f"{admin_url}/admin/v2/clusters", headers=headers)
        with urllib.request.urlopen(request, timeout=_DEADLINE_S, context=context):
            pass
    except urllib.error.HTTPError as exc:
        refused = exc.code == 401
    except Exception:  # no answer, TLS, a secret file: not this check's to say
        refused = False
    _ASKED[admin_url] = (now, refused)
    return refused
