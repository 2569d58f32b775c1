"""The etcd coordinator: the backend contract against a real etcd, and what only etcd shows.

The contract runs on the etcd server of ``scripts/services up etcd`` (the ``etcd_service``
fixture), each test in a cluster of its own (``etcd://HOST:PORT/<cluster>``, derived from
its ``tmp_path``: the same store for two clients of one test, and for its child
processes), whose keys are deleted afterwards. Here too: several clusters on one etcd, a
watch that lives through an etcd restart, a watch whose start was compacted, a put while
etcd is down, and what the lease TTL allows.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.adapters.backends.coordination.coordinator_clock import SYSTEM_CLOCK
from nereus.adapters.backends.coordination.etcd import EtcdAddress, EtcdCoordinator
from nereus.adapters.backends.coordination.etcd_wire import KeyLayout
from nereus.coordination import (
    CoordinatorUnavailable,
    KeyNotFound,
    NotificationsLost,
    NotificationType,
    prefix_range,
)
from tests.integration.coordinator_child import ChildOpener
from tests.integration.coordinator_contract import CoordinatorContract, changes, collect_until
from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.services import run_services
from tests.polling import wait_until

CREATED, MODIFIED, DELETED = (NotificationType.KEY_CREATED, NotificationType.KEY_MODIFIED,
                              NotificationType.KEY_DELETED)


def open_etcd(url: str) -> EtcdCoordinator:
    """The child processes' opener (``ChildOpener``): the coordinator at ``url``."""
    return EtcdCoordinator.from_url(url)


def cluster_of(tmp_path: Path) -> str:
    """A cluster name of this test's own (the same for every client of the test)."""
    return "test-" + hashlib.blake2b(str(tmp_path).encode(), digest_size=8).hexdigest()


def address(endpoint: EtcdEndpoint, cluster: str) -> EtcdAddress:
    return EtcdAddress(endpoint.host, endpoint.port, cluster)


def forget(endpoint: EtcdEndpoint, cluster: str) -> None:
    """Delete every key of ``cluster`` from the server."""
    endpoint.client().delete_prefix(KeyLayout.of(cluster).root)


class TestEtcdCoordinator(CoordinatorContract):
    """The etcd coordinator keeps every promise of the Coordinator contract."""

    @pytest.fixture(autouse=True)
    def _etcd(self, etcd_endpoint: EtcdEndpoint, tmp_path: Path) -> Iterator[None]:  # noqa: F811
        self.endpoint = etcd_endpoint
        yield
        forget(etcd_endpoint, cluster_of(tmp_path))

    def make_coordinator(self, tmp_path: Path) -> EtcdCoordinator:
        return EtcdCoordinator(address(self.endpoint, cluster_of(tmp_path)))

    def child_opener(self, tmp_path: Path) -> ChildOpener:
        return ChildOpener(f"{__name__}:open_etcd",
                           address(self.endpoint, cluster_of(tmp_path)).url)


@pytest.fixture
def cluster(etcd_endpoint: EtcdEndpoint, tmp_path: Path) -> Iterator[EtcdAddress]:  # noqa: F811
    """This test's cluster on the server, forgotten afterwards."""
    yield address(etcd_endpoint, cluster_of(tmp_path))
    forget(etcd_endpoint, cluster_of(tmp_path))


@pytest.fixture
def coordinator(cluster: EtcdAddress) -> Iterator[EtcdCoordinator]:
    with EtcdCoordinator(cluster, watch_retry_max_s=0.2) as opened:
        yield opened


# the namespace ----------------------------------------------------------------------------
def test_two_clusters_on_one_etcd_do_not_see_each_other(
        cluster: EtcdAddress, etcd_endpoint: EtcdEndpoint) -> None:  # noqa: F811
    """Two clusters on one etcd keep their records apart: the same key holds different
    values in each, lists and range deletes stay within the cluster, and everything a
    cluster writes is under /nereus/<cluster>/."""
    other = address(etcd_endpoint, cluster.cluster + "-other")
    try:
        with EtcdCoordinator(cluster) as one, EtcdCoordinator(other) as two:
            one.put("config", b"one")
            two.put("config", b"two")
            one.put("nodes/a", b"x")
            assert (one.get("config").value, two.get("config").value) == (b"one", b"two")
            assert two.list(*prefix_range("nodes/")) == []
            two.delete_range("", "~")
            assert one.list("", "~") == ["config", "nodes/a"]
            with pytest.raises(KeyNotFound):
                two.get("config")
        stored = etcd_endpoint.client().get_prefix(KeyLayout.of(cluster.cluster).root)
        assert sorted(kv["key"] for _, kv in stored) == [
            f"/nereus/{cluster.cluster}/keys/config".encode(),
            f"/nereus/{cluster.cluster}/keys/nodes/a".encode()]
    finally:
        forget(etcd_endpoint, other.cluster)


def test_keys_are_utf8_and_ordered_by_code_point(coordinator: EtcdCoordinator) -> None:
    """Keys beyond ASCII are stored as UTF-8, so they come back as written and in code
    point order, as the Protocol's ranges promise."""
    keys = ["k/z", "k/é", "k/ä¸­", "k/\U0001f600", "k/a"]
    for key in keys:
        coordinator.put(key, key.encode())
    assert coordinator.list(*prefix_range("k/")) == sorted(keys)
    assert [r.value.decode() for r in coordinator.range_scan(*prefix_range("k/"))] == \
        sorted(keys)


def test_versions_are_etcd_revisions_without_timestamps(coordinator: EtcdCoordinator) -> None:
    """A record's version id is etcd's mod_revision, its modifications count etcd's version
    minus one, and both timestamps are 0 (etcd keeps no times)."""
    first = coordinator.put("k", b"1")
    second = coordinator.put("k", b"2")
    raw = coordinator.layout.record("k").decode()
    client = EtcdEndpoint(coordinator.address.host, coordinator.address.port).client()
    (_, kv), = client.get(raw, metadata=True)
    assert (second.version_id, second.modifications_count) == \
        (int(kv["mod_revision"]), int(kv["version"]) - 1)
    assert first.version_id < second.version_id
    assert (second.created_timestamp_ms, second.modified_timestamp_ms) == (0, 0)


# sessions ---------------------------------------------------------------------------------
def test_a_session_ttl_is_whole_seconds_of_at_least_two(coordinator: EtcdCoordinator) -> None:
    """etcd's leases have whole seconds and at least 2 of them: a shorter TTL is refused
    before anything is written, a fractional one is rounded up (the session's ttl_ms is
    what etcd granted), and the session is certain for that long from its grant."""
    with pytest.raises(ValueError, match="at least 2000 ms"):
        coordinator.create_session(1_999, client_identity="node-1")
    session = coordinator.create_session(2_500, client_identity="node-1")
    assert session.ttl_ms == 3_000
    assert session.certain_until_ms() > SYSTEM_CLOCK.monotonic_ms() + 2_000
    session.close()


@pytest.mark.serial  # etcd, which other tests share, restarted or compacted
def test_a_session_lives_through_a_short_etcd_restart(
        coordinator: EtcdCoordinator, etcd_endpoint: EtcdEndpoint) -> None:  # noqa: F811
    """Stopping etcd makes a put fail with CoordinatorUnavailable naming the server; a
    session whose TTL outlasts the restart keeps its lease and its record (etcd restores
    leases and extends them), once keep-alives reach it again."""
    session = coordinator.create_session(10_000, client_identity="node-1")
    coordinator.put("member", b"x", ephemeral=session)
    down = pytest.raises(CoordinatorUnavailable, match=str(etcd_endpoint.port))
    with restarted_etcd(), down:
        coordinator.put("other", b"x")
    before = session.certain_until_ms()
    wait_until("a keep-alive reaches the restarted etcd",
               lambda: session.certain_until_ms() > before, 10.0)
    assert not session.lost()
    assert coordinator.get("member").version.session_id == session.session_id
    session.close()


# notifications ----------------------------------------------------------------------------
@pytest.mark.serial  # etcd, which other tests share, restarted or compacted
def test_a_watch_resumes_after_an_etcd_restart_without_losing_a_change(
        coordinator: EtcdCoordinator) -> None:
    """A subscription whose stream ends because etcd stops opens a new watch, from the
    revision after the last one it delivered, once etcd is back: a change made before the
    restart and not read yet, and the changes made right after etcd is up again (whether
    or not the new watch was open yet), all arrive, in order, once each."""
    notifications = coordinator.get_notifications("nodes/")
    coordinator.put("nodes/a", b"1")
    assert changes(collect_until(notifications, "nodes/a")) == [(CREATED, "nodes/a")]
    coordinator.put("nodes/b", b"1")  # written, not read yet
    opened = notifications.streams_opened
    with restarted_etcd():
        pass
    coordinator.put("nodes/a", b"2")
    coordinator.delete("nodes/b")
    coordinator.put("nodes/end", b"")
    seen = collect_until(notifications, "nodes/end")
    assert changes(seen) == [(CREATED, "nodes/b"), (MODIFIED, "nodes/a"),
                             (DELETED, "nodes/b"), (CREATED, "nodes/end")]
    assert notifications.streams_opened > opened
    assert notifications.poll(0.3) is None


@pytest.mark.serial  # etcd, which other tests share, restarted or compacted
def test_a_watch_from_a_compacted_revision_raises_notifications_lost(
        coordinator: EtcdCoordinator) -> None:
    """A subscription that must start at a revision etcd has compacted away (its changes
    are gone) raises NotificationsLost on every read instead of starting with a gap; one
    from a revision still kept replays every change since."""
    first = coordinator.put("nodes/a", b"1")
    coordinator.put("nodes/a", b"2")
    last = coordinator.put("nodes/b", b"1")
    replay = coordinator.get_notifications("nodes/", after_version_id=first.version_id)
    assert changes(collect_until(replay, "nodes/b")) == [(MODIFIED, "nodes/a"),
                                                          (CREATED, "nodes/b")]
    client = EtcdEndpoint(coordinator.address.host, coordinator.address.port).client()
    client.post(client.get_url("/kv/compaction"), json={"revision": last.version_id})
    behind = coordinator.get_notifications("nodes/", after_version_id=first.version_id)
    with pytest.raises(NotificationsLost):
        behind.poll(10.0)
    with pytest.raises(NotificationsLost):
        next(behind)
    current = coordinator.get_notifications("nodes/", after_version_id=last.version_id)
    coordinator.put("nodes/c", b"1")
    assert changes(collect_until(current, "nodes/c")) == [(CREATED, "nodes/c")]


# the server -------------------------------------------------------------------------------
@contextlib.contextmanager
def restarted_etcd() -> Iterator[None]:
    """``scripts/services down etcd``, the body, ``up etcd`` (with this process's
    environment: the same ports and runtime directory as the session's server)."""
    down = run_services("down", "etcd", timeout=120)
    assert down.returncode == 0, down.stderr
    try:
        yield
    finally:
        up = run_services("up", "etcd", timeout=120)
        assert up.returncode == 0, up.stderr
