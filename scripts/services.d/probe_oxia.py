"""The Oxia readiness probe: put one key, get it back, delete it, through the coordinator's
own gRPC client (``nereus.adapters.backends.coordination.oxia``: the messages ``make install``
generates from Oxia's proto), under a cluster of the probe's own.

The round trip goes through the shard's WAL (fsync on), so it succeeds only once the shard
has a leader and applies writes. Imported where used.
"""

from __future__ import annotations

import uuid

from probe_support import HOST, env


def oxia_secure_round_trip(budget: float) -> str:
    """oxia-secure: the same round trip over TLS, with the test CA alone trusted and the
    client certificate Oxia requires (the coordinator's own TLS settings, as a node's
    [cluster] gives them)."""
    import os

    from nereus.adapters.backends.coordination.oxia_security import use_oxia_security
    from nereus.config import ClusterSettings

    certs = os.environ["NEREUS_SECURE_CERTS"]
    use_oxia_security(ClusterSettings(
        coordinator=f"oxia://{HOST}:{env('NEREUS_OXIA_PORT', '6748')}/nereus-probe",
        node_id="probe", tls_ca_file=f"{certs}/ca.pem", tls_cert_file=f"{certs}/client.pem",
        tls_key_file=f"{certs}/client.key"))
    return oxia_round_trip(budget).replace("oxia ok:", "oxia-secure ok (TLS, client certificate):")


def oxia_round_trip(budget: float) -> str:
    from nereus.adapters.backends.coordination.oxia import OxiaAddress, OxiaCoordinator
    from nereus.coordination.errors import KeyNotFound

    port = int(env("NEREUS_OXIA_PORT", "6648"))
    address = OxiaAddress(HOST, port, "default", "nereus-probe")
    key = f"probe/{uuid.uuid4()}"
    payload = f"probe-{uuid.uuid4()}".encode()
    with OxiaCoordinator(address, request_timeout_s=max(1.0, budget)) as oxia:
        written = oxia.put(key, payload, expected_version_id=-1)
        got = oxia.get(key)
        if (got.value, got.version) != (payload, written):
            raise RuntimeError(f"read back {got!r}, wrote {payload!r} at {written!r}")
        if not oxia.delete(key, expected_version_id=written.version_id):
            raise RuntimeError(f"delete of {key} deleted nothing")
        try:
            oxia.get(key)
        except KeyNotFound:
            pass
        else:
            raise RuntimeError(f"{key} still there after its delete")
    return f"oxia ok: {HOST}:{port} put/get/delete round trip (version {written.version_id})"
