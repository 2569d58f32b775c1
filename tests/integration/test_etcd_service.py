"""The etcd client (etcd3gw) does, against the real server, what the coordinator builds on.

Sessions are leases kept alive by the client: a key put on a lease vanishes when the lease
is no longer kept alive, and stays while it is. Compare-and-set is a transaction on a key's
``mod_revision`` (0 = absent): one on a stale revision changes nothing. Notifications are
watches on a prefix, resumable from a revision; the store's revision, returned by every
write, is the fencing token. Each test works under a prefix of its own, deleted afterwards.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from tests.integration.etcd_service import EtcdService, etcd_service, watching  # noqa: F401

if TYPE_CHECKING:
    from etcd3gw.client import Etcd3Client
    from etcd3gw.lease import Lease

LEASE_TTL_S = 2  # etcd's smallest: 1.5 x the election timeout (1 s), rounded up
EXPIRY_DEADLINE_S = 15.0  # TTL, plus etcd's 0.5 s expiry sweep, plus a slow machine


@dataclass(frozen=True, slots=True)
class TxnOutcome:
    """Whether a transaction's compares held, and the store's revision after it."""

    succeeded: bool
    revision: int


def b64(text: str) -> str:
    """A key or value as the JSON gateway carries it."""
    return base64.b64encode(text.encode()).decode()


def put(client: Etcd3Client, key: str, value: str, *, lease: Lease | None = None) -> int:
    """Put ``key`` and return the revision of the write (etcd3gw's ``put`` returns True)."""
    request: dict[str, object] = {"key": b64(key), "value": b64(value)}
    if lease is not None:
        request["lease"] = lease.id
    return int(client.post(client.get_url("/kv/put"), json=request)["header"]["revision"])


def put_if_mod_revision(client: Etcd3Client, key: str, value: str, expected: int) -> TxnOutcome:
    """Put ``key`` only if its ``mod_revision`` is ``expected`` (0: only if it is absent)."""
    response = client.transaction({
        "compare": [{"key": b64(key), "result": "EQUAL", "target": "MOD",
                     "mod_revision": expected}],
        "success": [{"request_put": {"key": b64(key), "value": b64(value)}}],
        "failure": [],
    })
    return TxnOutcome(response.get("succeeded", False), int(response["header"]["revision"]))


def read(client: Etcd3Client, key: str) -> tuple[bytes, int] | None:
    """The key's value and ``mod_revision``, or None if it is absent."""
    found = client.get(key, metadata=True)
    if not found:
        return None
    value, meta = found[0]
    return value, int(meta["mod_revision"])


def store_revision(client: Etcd3Client) -> int:
    """The store's current revision (from the header of any read)."""
    response = client.post(client.get_url("/kv/range"), json={"key": b64("\0")})
    return int(response["header"]["revision"])


@pytest.fixture
def prefix(etcd_service: EtcdService) -> Iterator[str]:  # noqa: F811
    """A key prefix no other test or run uses; its keys are deleted afterwards (when there
    is a server: without one, the test itself fails in ``require()``)."""
    name = f"/nereus-test/{uuid.uuid4().hex[:12]}/"
    yield name
    if etcd_service.endpoint is not None:
        etcd_service.endpoint.client().delete_prefix(name)


def test_a_leased_key_vanishes_when_its_lease_is_not_kept_alive(
        etcd_service: EtcdService, prefix: str) -> None:  # noqa: F811
    """Two keys on two leases of the smallest TTL: the one whose lease is kept alive stays,
    the other one's DELETE arrives on the watch once its lease expires, and that lease
    cannot be kept alive again; revoking the kept lease deletes its key at once."""
    client = etcd_service.require().client()
    kept, lapsed = client.lease(ttl=LEASE_TTL_S), client.lease(ttl=LEASE_TTL_S)
    first = put(client, prefix + "kept", "alive", lease=kept)
    put(client, prefix + "lapsed", "gone soon", lease=lapsed)
    assert client.get(prefix + "kept", metadata=True)[0][1].get("lease") == str(kept.id)

    deleted: list[bytes] = []
    with watching(client, prefix, start_revision=first) as events:
        end = time.monotonic() + EXPIRY_DEADLINE_S
        while not deleted:
            if time.monotonic() > end:
                pytest.fail(f"the lapsed lease's key was not deleted within {EXPIRY_DEADLINE_S} s")
            assert kept.refresh() == LEASE_TTL_S  # a keepalive answers with the whole TTL
            event = events.poll(0.25)
            if event is not None and event.get("type") == "DELETE":
                deleted.append(event["kv"]["key"])

    assert deleted == [(prefix + "lapsed").encode()]
    assert client.get(prefix + "lapsed") == []
    assert client.get(prefix + "kept") == [b"alive"]
    assert lapsed.refresh() == -1  # an expired lease is gone for good
    kept.revoke()
    assert client.get(prefix + "kept") == []


def test_a_compare_and_set_on_a_stale_mod_revision_fails_and_writes_nothing(
        etcd_service: EtcdService, prefix: str) -> None:  # noqa: F811
    """A put conditioned on the key's current mod_revision succeeds and moves the store's
    revision on; the same condition, now stale, fails, leaves the value and the revision as
    they were."""
    client = etcd_service.require().client()
    key = prefix + "record"
    written = put(client, key, "v1")
    assert read(client, key) == (b"v1", written)

    fresh = put_if_mod_revision(client, key, "v2", expected=written)
    assert fresh.succeeded
    assert fresh.revision > written
    assert read(client, key) == (b"v2", fresh.revision)

    stale = put_if_mod_revision(client, key, "v3", expected=written)
    assert stale == TxnOutcome(succeeded=False, revision=fresh.revision)
    assert read(client, key) == (b"v2", fresh.revision)


def test_a_compare_and_set_on_mod_revision_zero_creates_only_an_absent_key(
        etcd_service: EtcdService, prefix: str) -> None:  # noqa: F811
    """mod_revision 0 means "absent": the first create wins, the second one fails."""
    client = etcd_service.require().client()
    key = prefix + "owner"
    first = put_if_mod_revision(client, key, "node-a", expected=0)
    second = put_if_mod_revision(client, key, "node-b", expected=0)
    assert first.succeeded
    assert not second.succeeded
    assert read(client, key) == (b"node-a", first.revision)


def test_a_watch_on_a_prefix_sees_a_put_with_the_revision_the_put_returned(
        etcd_service: EtcdService, prefix: str) -> None:  # noqa: F811
    """A put under the watched prefix arrives as a PUT event carrying its key, value and
    mod_revision (the put's revision); a put outside the prefix does not arrive."""
    client = etcd_service.require().client()
    outside = f"/nereus-test/{uuid.uuid4().hex[:12]}-outside"
    try:
        with watching(client, prefix, start_revision=store_revision(client) + 1) as events:
            put(client, outside, "not watched")
            revision = put(client, prefix + "a", "hello")
            event = events.next(10.0, f"the PUT of {prefix}a")
            assert event.get("type", "PUT") == "PUT"
            assert event["kv"]["key"] == (prefix + "a").encode()
            assert event["kv"].get("value") == b"hello"
            assert int(event["kv"]["mod_revision"]) == revision
            assert events.poll(0.2) is None
    finally:
        client.delete(outside)


def test_a_watch_from_an_older_revision_replays_every_change_since_in_order(
        etcd_service: EtcdService, prefix: str) -> None:  # noqa: F811
    """A watch started at a past revision first delivers the puts and deletes made since, in
    revision order: a watcher that lost its stream resumes from its last revision + 1."""
    client = etcd_service.require().client()
    first = put(client, prefix + "a", "1")
    second = put(client, prefix + "b", "2")
    client.delete(prefix + "a")
    with watching(client, prefix, start_revision=first) as events:
        seen = [events.next(10.0, f"change {n} of 3") for n in (1, 2, 3)]
    assert [(e.get("type", "PUT"), e["kv"]["key"]) for e in seen] == [
        ("PUT", (prefix + "a").encode()), ("PUT", (prefix + "b").encode()),
        ("DELETE", (prefix + "a").encode())]
    revisions = [int(e["kv"]["mod_revision"]) for e in seen]
    assert revisions[:2] == [first, second]
    assert revisions[2] > second
