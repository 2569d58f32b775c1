"""The etcd readiness probe: put one key, get it back, delete it, through the v3 JSON gateway.

The round trip goes through a quorum write and a linearizable read, so it succeeds only once
the member has elected itself leader and applies writes. Needs ``etcd3gw`` (the client the
coordinator uses, see docs/coordination.md), imported where used.
"""

from __future__ import annotations

import uuid
from typing import Any

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


def etcd_secure_round_trip(budget: float) -> str:
    """etcd-secure: over TLS with the test CA's client certificate; the first time, make the
    `root` and `nereus` users (nereus: read-write on /nereus/ only) and turn auth on; then
    the same round trip as user nereus, under /nereus/probe/ (etcd-client.pem: etcd 3.4's
    gateway refuses a certificate with a CommonName)."""
    import base64
    import os

    import requests

    certs = os.environ["NEREUS_SECURE_CERTS"]
    url = f"https://{HOST}:{env('NEREUS_ETCD_PORT', '2479')}/v3"
    session = requests.Session()
    session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the test CA
    tls = {"verify": f"{certs}/ca.pem",
           "cert": (f"{certs}/etcd-client.pem", f"{certs}/etcd-client.key")}
    timeout = max(1.0, budget)

    def call(path: str, body: dict[str, Any], token: str | None = None) -> dict[str, Any]:
        headers = {"Authorization": token} if token else {}
        answer = session.post(f"{url}/{path}", json=body, headers=headers, timeout=timeout,
                              **tls)  # type: ignore[arg-type]
        if answer.status_code != 200:
            raise RuntimeError(f"{path}: HTTP {answer.status_code}: {answer.text[:300]}")
        return answer.json()  # type: ignore[no-any-return]

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    password = open(f"{certs}/etcd-password").read().strip()  # noqa: SIM115
    try:
        token = str(call("auth/authenticate", {"name": "nereus", "password": password})["token"])
    except RuntimeError as exc:
        if "authentication is not enabled" not in str(exc):
            raise
        root = open(f"{certs}/etcd-root-password").read().strip()  # noqa: SIM115
        call("auth/user/add", {"name": "root", "password": root})
        call("auth/user/grant", {"user": "root", "role": "root"})
        call("auth/role/add", {"name": "nereus"})
        call("auth/role/grant", {"name": "nereus", "perm": {
            "permType": "READWRITE", "key": b64("/nereus/"), "range_end": b64("/nereus0")}})
        call("auth/user/add", {"name": "nereus", "password": password})
        call("auth/user/grant", {"user": "nereus", "role": "nereus"})
        call("auth/enable", {})
        token = str(call("auth/authenticate", {"name": "nereus", "password": password})["token"])
    key = b64(f"/nereus/probe/{uuid.uuid4()}")
    call("kv/put", {"key": key, "value": b64("probe")}, token)
    got = call("kv/range", {"key": key}, token)
    if not got.get("kvs"):
        raise RuntimeError(f"read back nothing: {got}")
    call("kv/deleterange", {"key": key}, token)
    return f"etcd ok: {url} as user nereus over TLS with a client certificate, round trip"
