"""The etcd readiness probe: put one key, get it back, delete it, through the v3 JSON gateway.

The round trip goes through a quorum write and a linearizable read, so it succeeds only once
the member has elected itself leader and applies writes. Needs ``etcd3gw`` (the client the
coordinator uses, see docs/coordination.md), imported where used.
"""

from __future__ import annotations

import uuid

from probe_support import HOST, env


def etcd_round_trip(budget: float) -> str:
    from etcd3gw.client import Etcd3Client

    port = int(env("NEREUS_ETCD_PORT", "2379"))
    client = Etcd3Client(host=HOST, port=port, timeout=max(1.0, budget))
    key = f"nereus-probe/{uuid.uuid4()}"
    payload = f"probe-{uuid.uuid4()}".encode()
    client.put(key, payload)
    got = client.get(key)
    if got != [payload]:
        raise RuntimeError(f"read back {got!r}, wrote {payload!r}")
    if not client.delete(key):
        raise RuntimeError(f"delete of {key} deleted nothing")
    if client.get(key):
        raise RuntimeError(f"{key} still there after its delete")
    version = client.status()["version"]
    return f"etcd ok: http://{HOST}:{port} etcd {version} put/get/delete round trip"
