"""The Oxia coordinator: the backend contract against a real Oxia, and what only Oxia shows.

The contract runs on the Oxia server of ``scripts/services up oxia`` (the ``oxia_service``
fixture), each test in a cluster of its own (``oxia://HOST:PORT/<cluster>``, derived from
its ``tmp_path``: the same store for two clients of one test, and for its child processes),
whose records are deleted afterwards. Here too, on the shared server: key order with ``/``
and ``.`` in keys, two clusters apart, versions with Oxia's timestamps, a subscription
whose connection is cut and healed; and on private servers (``PrivateOxia``): a call to a
paused server failing within its deadline, a session and a subscription living through a
SIGKILL and restart, a resumed subscription whose changes were trimmed meanwhile
(``NotificationsLost``), and a namespace of several shards.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nereus.adapters.backends.coordination.coordinator_clock import SYSTEM_CLOCK
from nereus.adapters.backends.coordination.oxia import OxiaAddress, OxiaCoordinator
from nereus.coordination import (
    EXPECTED_RECORD_DOES_NOT_EXIST,
    CoordinationError,
    CoordinatorUnavailable,
    KeyNotFound,
    NotificationsLost,
    NotificationType,
    SessionExpired,
    prefix_range,
)
from tests.integration.coordinator_child import ChildOpener
from tests.integration.coordinator_contract import CoordinatorContract, changes, collect_until
from tests.integration.oxia_service import (  # noqa: F401
    OxiaEndpoint,
    Relay,
    oxia_endpoint,
    oxia_service,
    private_oxia,
)
from tests.integration.services import closed_port
from tests.polling import wait_until

CREATED, MODIFIED, DELETED = (NotificationType.KEY_CREATED, NotificationType.KEY_MODIFIED,
                              NotificationType.KEY_DELETED)
EVERYTHING = ("", chr(0x10FFFF))  # every key of a cluster


def open_oxia(url: str) -> OxiaCoordinator:
    """The child processes' opener (``ChildOpener``): the coordinator at ``url``."""
    return OxiaCoordinator.from_url(url)


def cluster_of(tmp_path: Path) -> str:
    """A cluster name of this test's own (the same for every client of the test)."""
    return "test-" + hashlib.blake2b(str(tmp_path).encode(), digest_size=8).hexdigest()


def address(endpoint: OxiaEndpoint, cluster: str) -> OxiaAddress:
    return OxiaAddress(endpoint.host, endpoint.port, "default", cluster)


def forget(endpoint: OxiaEndpoint, cluster: str) -> None:
    """Delete every record of ``cluster`` from the server."""
    with OxiaCoordinator(address(endpoint, cluster)) as oxia:
        oxia.delete_range(*EVERYTHING)


class TestOxiaCoordinator(CoordinatorContract):
    """The Oxia coordinator keeps every promise of the Coordinator contract."""

    @pytest.fixture(autouse=True)
    def _oxia(self, oxia_endpoint: OxiaEndpoint, tmp_path: Path) -> Iterator[None]:  # noqa: F811
        self.endpoint = oxia_endpoint
        yield
        forget(oxia_endpoint, cluster_of(tmp_path))

    def make_coordinator(self, tmp_path: Path) -> OxiaCoordinator:
        return OxiaCoordinator(address(self.endpoint, cluster_of(tmp_path)))

    def child_opener(self, tmp_path: Path) -> ChildOpener:
        return ChildOpener(f"{__name__}:open_oxia",
                           address(self.endpoint, cluster_of(tmp_path)).url)


@pytest.fixture
def cluster(oxia_endpoint: OxiaEndpoint, tmp_path: Path) -> Iterator[OxiaAddress]:  # noqa: F811
    """This test's cluster on the shared server, forgotten afterwards."""
    yield address(oxia_endpoint, cluster_of(tmp_path))
    forget(oxia_endpoint, cluster_of(tmp_path))


@pytest.fixture
def coordinator(cluster: OxiaAddress) -> Iterator[OxiaCoordinator]:
    with OxiaCoordinator(cluster, watch_retry_max_s=0.2) as opened:
        yield opened


# keys and clusters --------------------------------------------------------------------------
def test_keys_with_slashes_and_dots_come_back_in_code_point_order(
        coordinator: OxiaCoordinator) -> None:
    """Oxia orders keys segment by segment on '/', but ranges here are code point order:
    keys with several '/', with '.', and beyond ASCII are listed and scanned in code point
    order, a prefix range holds exactly the keys under the prefix, and a range delete
    removes exactly its range."""
    keys = ["x/z", "x/b/c", "x/b", "x/b.c", "x/b-c", "x/b0", "x/.", "x/a/b/c/d", "x0", "x",
            "x/é", "x/\U0001f600", "x.y", "x-y", "x/"]
    for key in keys:
        coordinator.put(key, key.encode())
    assert coordinator.list(*EVERYTHING) == sorted(keys)
    under = sorted(k for k in keys if k.startswith("x/"))
    assert coordinator.list(*prefix_range("x/")) == under
    assert [r.key for r in coordinator.range_scan(*prefix_range("x/"))] == under
    assert [r.value for r in coordinator.range_scan("x/b", "x/c")] == \
        [k.encode() for k in sorted(keys) if "x/b" <= k < "x/c"]
    coordinator.delete_range(*prefix_range("x/b"))
    assert coordinator.list(*EVERYTHING) == sorted(k for k in keys if not k.startswith("x/b"))


def test_two_clusters_on_one_oxia_do_not_see_each_other(
        cluster: OxiaAddress, oxia_endpoint: OxiaEndpoint) -> None:  # noqa: F811
    """Two clusters on one Oxia keep their records apart: the same key holds different
    values in each, lists and range deletes stay within the cluster."""
    other = address(oxia_endpoint, cluster.cluster + "-other")
    try:
        with OxiaCoordinator(cluster) as one, OxiaCoordinator(other) as two:
            one.put("config", b"one")
            two.put("config", b"two")
            one.put("nodes/a", b"x")
            assert (one.get("config").value, two.get("config").value) == (b"one", b"two")
            assert two.list(*prefix_range("nodes/")) == []
            two.delete_range(*EVERYTHING)
            assert one.list(*EVERYTHING) == ["config", "nodes/a"]
    finally:
        forget(oxia_endpoint, other.cluster)


def test_versions_carry_oxia_timestamps_and_the_session_identity(
        coordinator: OxiaCoordinator) -> None:
    """A record's version has Oxia's creation and modification times (ms, creation kept
    across puts), and an ephemeral one the session's id and client identity."""
    before = int(time.time() * 1000) - 60_000
    first = coordinator.put("k", b"1")
    second = coordinator.put("k", b"2")
    assert first.created_timestamp_ms > before
    assert second.created_timestamp_ms == first.created_timestamp_ms
    assert second.modified_timestamp_ms >= first.modified_timestamp_ms
    session = coordinator.create_session(2_000, client_identity="node-1@host")
    member = coordinator.put("member", b"x", ephemeral=session)
    assert (member.session_id, member.client_identity) == (session.session_id, "node-1@host")
    session.close()


def test_a_session_ttl_is_two_seconds_to_five_minutes(coordinator: OxiaCoordinator) -> None:
    """Oxia's sessions last 2 s to 5 min: other TTLs are refused before anything is sent,
    and a session is certain for its TTL from its creation."""
    for ttl_ms in (1_999, 300_001):
        with pytest.raises(ValueError, match="2000 to 300000"):
            coordinator.create_session(ttl_ms, client_identity="node-1")
    session = coordinator.create_session(2_000, client_identity="node-1")
    assert session.certain_until_ms() > SYSTEM_CLOCK.monotonic_ms() + 1_500
    session.close()


# errors -------------------------------------------------------------------------------------
def test_an_unreachable_server_is_coordinator_unavailable() -> None:
    """A port nobody listens on: every call fails at once with CoordinatorUnavailable
    naming the server, never a gRPC exception."""
    port = closed_port()
    with OxiaCoordinator(OxiaAddress("127.0.0.1", port, "default", "c"),
                         request_timeout_s=2.0) as oxia:
        started = time.monotonic()
        with pytest.raises(CoordinatorUnavailable, match=str(port)):
            oxia.put("k", b"x")
        with pytest.raises(CoordinatorUnavailable, match=str(port)):
            oxia.get_notifications("")
        assert time.monotonic() - started < 10


def test_a_namespace_the_server_lacks_is_named(oxia_endpoint: OxiaEndpoint) -> None:  # noqa: F811
    """oxia://HOST:PORT/NAMESPACE/CLUSTER with a namespace the server does not have fails
    with a CoordinationError naming it."""
    nowhere = OxiaAddress(oxia_endpoint.host, oxia_endpoint.port, "nowhere", "c")
    with OxiaCoordinator(nowhere, request_timeout_s=2.0) as oxia, \
            pytest.raises(CoordinationError, match="nowhere"):
        oxia.put("k", b"x")


def test_a_call_to_a_paused_server_fails_within_its_deadline(
        oxia_endpoint: OxiaEndpoint, tmp_path: Path) -> None:  # noqa: F811
    """Against a server stopped with SIGSTOP (connection open, nothing answering), a put,
    a get and a session's keep-alive each fail with CoordinatorUnavailable within the
    request deadline; once it resumes, calls succeed again. A write that ran out of its
    deadline has an unknown outcome: the paused server may apply it when it resumes."""
    with private_oxia(oxia_endpoint.binary, tmp_path / "oxia") as server, \
            OxiaCoordinator(address(server.endpoint, "c"), request_timeout_s=1.0) as oxia:
        oxia.put("k", b"1")
        session = oxia.create_session(10_000, client_identity="node-1")
        server.pause()
        try:
            for call in (lambda: oxia.put("k", b"2"), lambda: oxia.get("k"),
                         session.keep_alive):
                started = time.monotonic()
                with pytest.raises(CoordinatorUnavailable, match="within 1 s"):
                    call()
                assert time.monotonic() - started < 3
        finally:
            server.resume()
        assert oxia.put("k", b"3").modifications_count in (1, 2)  # the timed-out put: maybe
        assert not session.lost()
        session.close()


# surviving the server ---------------------------------------------------------------------------
def test_a_session_and_a_subscription_live_through_a_sigkill_and_restart(
        oxia_endpoint: OxiaEndpoint, tmp_path: Path) -> None:  # noqa: F811
    """Oxia killed with SIGKILL and started again on the same data within the session's
    TTL: a put meanwhile is CoordinatorUnavailable; the session keeps its record (Oxia
    restores sessions and restarts their timers) once keep-alives reach it again; the
    subscription resumes and delivers every change, the one made before the kill and not
    read yet included, once each and in order, without NotificationsLost."""
    with private_oxia(oxia_endpoint.binary, tmp_path / "oxia") as server, \
            OxiaCoordinator(address(server.endpoint, "c"), watch_retry_max_s=0.2) as oxia:
        session = oxia.create_session(10_000, client_identity="node-1")
        oxia.put("member", b"x", ephemeral=session)
        notifications = oxia.get_notifications("nodes/")
        oxia.put("nodes/a", b"1")
        assert changes(collect_until(notifications, "nodes/a")) == [(CREATED, "nodes/a")]
        oxia.put("nodes/b", b"1")  # written, not read yet
        opened = notifications.streams_opened
        server.kill()
        with pytest.raises(CoordinatorUnavailable):
            oxia.put("other", b"x")
        server.start()
        before = session.certain_until_ms()
        wait_until("a keep-alive reaches the restarted Oxia",
                   lambda: session.certain_until_ms() > before, 10.0)
        assert not session.lost()
        assert oxia.get("member").version.session_id == session.session_id
        wait_until("a put succeeds again", lambda: _put_ok(oxia, "nodes/a", b"2"), 10.0)
        oxia.delete("nodes/b")
        oxia.put("nodes/end", b"")
        seen = collect_until(notifications, "nodes/end")
        assert changes(seen) == [(CREATED, "nodes/b"), (MODIFIED, "nodes/a"),
                                 (DELETED, "nodes/b"), (CREATED, "nodes/end")]
        assert notifications.streams_opened > opened
        assert notifications.poll(0.3) is None
        session.close()


def _put_ok(oxia: OxiaCoordinator, key: str, value: bytes) -> bool:
    try:
        oxia.put(key, value)
    except CoordinatorUnavailable:
        return False
    return True


def test_a_cut_subscription_resumes_without_a_gap(
        cluster: OxiaAddress, oxia_endpoint: OxiaEndpoint) -> None:  # noqa: F811
    """One client's connection cut (its stream ends) while another writes, then healed:
    the subscription opens a new stream at the batch it last read and delivers every
    change made meanwhile, once each, in order."""
    relay = Relay(oxia_endpoint.target)
    host, _, port = relay.target.rpartition(":")
    relayed = OxiaAddress(host, int(port), "default", cluster.cluster)
    try:
        with OxiaCoordinator(relayed, watch_retry_max_s=0.2) as watcher, \
                OxiaCoordinator(cluster) as writer:
            notifications = watcher.get_notifications("n/")
            writer.put("n/a", b"1")
            assert changes(collect_until(notifications, "n/a")) == [(CREATED, "n/a")]
            opened = notifications.streams_opened
            relay.cut()
            writer.put("n/b", b"1")
            writer.put("n/a", b"2")
            relay.heal()
            writer.put("n/end", b"")
            assert changes(collect_until(notifications, "n/end")) == [
                (CREATED, "n/b"), (MODIFIED, "n/a"), (CREATED, "n/end")]
            assert notifications.streams_opened > opened
    finally:
        relay.close()


def test_a_subscription_whose_changes_were_trimmed_raises_notifications_lost(
        oxia_endpoint: OxiaEndpoint, tmp_path: Path) -> None:  # noqa: F811
    """A server that keeps notifications 1 s: one client's connection is cut, another
    writes, and the server trims those changes before the connection heals. The resumed
    stream cannot start at the batch last read, so the subscription raises
    NotificationsLost on every read instead of delivering with a gap; a new subscription
    works."""
    with private_oxia(oxia_endpoint.binary, tmp_path / "oxia", retention="1s") as server:
        relay = Relay(server.endpoint.target)
        host, _, port = relay.target.rpartition(":")
        try:
            with OxiaCoordinator(OxiaAddress(host, int(port), "default", "c"),
                                 watch_retry_max_s=0.2) as watcher, \
                    OxiaCoordinator(address(server.endpoint, "c")) as writer:
                notifications = watcher.get_notifications("n/")
                writer.put("n/a", b"1")
                assert changes(collect_until(notifications, "n/a")) == [(CREATED, "n/a")]
                relay.cut()
                writer.put("n/b", b"1")
                time.sleep(3)  # the retention (1 s) and a trim round (every 0.5 s) pass
                writer.put("n/c", b"1")
                relay.heal()
                with pytest.raises(NotificationsLost):
                    notifications.poll(15.0)
                with pytest.raises(NotificationsLost):
                    next(notifications)
                fresh = watcher.get_notifications("n/")
                writer.put("n/d", b"1")
                assert changes(collect_until(fresh, "n/d")) == [(CREATED, "n/d")]
        finally:
            relay.close()


def test_a_cluster_lives_on_one_shard_of_a_namespace_of_several(
        oxia_endpoint: OxiaEndpoint, tmp_path: Path) -> None:  # noqa: F811
    """On a namespace of 3 shards, every record of a cluster is on the one shard its
    partition key hashes to, so version ids strictly increase across all its keys (the
    fencing token holds) and one subscription sees every change; two clusters may use
    different shards."""
    with private_oxia(oxia_endpoint.binary, tmp_path / "oxia", shards=3) as server:
        shards = set()
        for name in ("c1", "c2", "c3", "c4", "c5"):
            with OxiaCoordinator(address(server.endpoint, name)) as oxia:
                notifications = oxia.get_notifications("")
                versions = [oxia.put(f"k/{i}", b"x").version_id for i in range(8)]
                versions.append(oxia.put("owner", b"n1",
                                         expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST
                                         ).version_id)
                assert versions == sorted(set(versions)), versions
                seen = collect_until(notifications, "owner")
                assert [n.key for n in seen] == [*(f"k/{i}" for i in range(8)), "owner"]
                shards.add(oxia._wire.shard()[0])
        assert len(shards) > 1, shards


def test_many_concurrent_writers_never_wedge_the_shard(
        oxia_endpoint: OxiaEndpoint, tmp_path: Path) -> None:  # noqa: F811
    """Sixteen clients writing at once, 300 puts each: every put succeeds. Oxia v0.14.0 as
    released appends concurrent writes to its WAL out of order, loses an offset and refuses
    every later write of the shard ("N can not immediately follow N-2") within about a
    second of this; scripts/services builds it with the upstream fix
    (scripts/services.d/oxia-v0.14.0-write-order.patch)."""
    errors: list[str] = []

    def writer(index: int, target: OxiaEndpoint) -> None:
        with OxiaCoordinator(address(target, "race")) as oxia:
            for n in range(300):
                try:
                    oxia.put(f"w{index}/{n}", b"x")
                except CoordinationError as exc:
                    errors.append(str(exc))
                    return

    with private_oxia(oxia_endpoint.binary, tmp_path / "oxia") as server:
        writers = [threading.Thread(target=writer, args=(i, server.endpoint))
                   for i in range(16)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join(120)
        assert errors == []
        with OxiaCoordinator(address(server.endpoint, "race")) as oxia:
            assert len(oxia.list(*EVERYTHING)) == 16 * 300


@dataclass
class LateSession:
    """A live Oxia session as a holder sees it when its certain-until instant has passed
    while a put was on its way (not yet found lost)."""

    session_id: int
    client_identity: str
    ttl_ms: int = 10_000

    def lost(self) -> bool:
        return False

    def certain_until_ms(self) -> int:
        return 0


def test_an_ephemeral_put_acknowledged_after_the_session_was_certain_is_undone(
        coordinator: OxiaCoordinator) -> None:
    """A put under a session acknowledged at or after the session's certain-until instant
    (Oxia may have been ending the session, and v0.14 can then keep the record for good)
    is deleted again and raises SessionExpired; the same put while certain stays."""
    session = coordinator.create_session(10_000, client_identity="node-1")
    late = LateSession(session.session_id, "node-1")
    with pytest.raises(SessionExpired, match="acknowledged only after"):
        coordinator.put("owner", b"n1", ephemeral=late)  # type: ignore[arg-type]
    with pytest.raises(KeyNotFound):
        coordinator.get("owner")
    kept = coordinator.put("owner", b"n1", ephemeral=session)
    assert coordinator.get("owner").version == kept
    session.close()
