"""The contract every coordinator backend passes (STYLE, habit 3): embedded SQLite, etcd.

A backend's test module subclasses ``CoordinatorContract`` as ``Test<Backend>Coordinator``
and implements two hooks:

* ``make_coordinator(tmp_path)``: a coordinator on the store that belongs to ``tmp_path``.
  Calling it twice with the same ``tmp_path`` gives two independent clients of the SAME
  store (two nodes); the contract closes every one it gets.
* ``child_opener(tmp_path)``: how another process opens that same store
  (``coordinator_child.ChildOpener``), for the promises only processes can test: racing
  creates, concurrent writers, a holder that dies or is paused.

Every test works under its own key prefix (``space``), so backends whose store outlives
a test (an etcd server) need no cleaning. Nothing here knows how a backend stores
records: only the ``Coordinator`` Protocol is used. Session expiry happens on the
backend's real clock here (``session_ttl_ms``, short); a backend with an injectable
clock tests the exact instant in its own module. Sessions and the promises that need
other processes are in ``coordinator_contract_sessions.py``, which this class inherits.
"""

from __future__ import annotations

import pytest

from nereus.coordination import (
    EXPECTED_RECORD_DOES_NOT_EXIST,
    Coordinator,
    KeyNotFound,
    Notification,
    Notifications,
    NotificationType,
    UnexpectedVersionId,
    prefix_range,
)
from tests.integration.coordinator_contract_sessions import MakeCoordinator, SessionsContract

NOTIFY_DEADLINE_S = 10.0  # a change reaches a subscriber within this
CREATED, MODIFIED, DELETED = (NotificationType.KEY_CREATED, NotificationType.KEY_MODIFIED,
                              NotificationType.KEY_DELETED)


def collect_until(notifications: Notifications, last_key: str) -> list[Notification]:
    """Every notification up to and including the first one for ``last_key``."""
    seen: list[Notification] = []
    while not seen or seen[-1].key != last_key:
        found = notifications.poll(NOTIFY_DEADLINE_S)
        assert found is not None, f"no notification within {NOTIFY_DEADLINE_S} s after {seen}"
        seen.append(found)
    return seen


def changes(seen: list[Notification]) -> list[tuple[NotificationType, str]]:
    return [(n.type, n.key) for n in seen]


def deleted_keys(seen: list[Notification], candidates: list[str]) -> set[str]:
    """The candidate keys the notifications report deleted, one by one or as a range."""
    out: set[str] = set()
    for n in seen:
        if n.type is DELETED:
            out.add(n.key)
        elif n.type is NotificationType.KEY_RANGE_DELETED and n.key_range_end is not None:
            out |= {k for k in candidates if n.key <= k < n.key_range_end}
    return out


class CoordinatorContract(SessionsContract):
    """Promises of the Coordinator Protocol, checked against one backend."""

    # compare-and-set ----------------------------------------------------------------------
    def test_put_then_get_returns_the_value_and_its_version(
            self, coordinator: Coordinator, space: str) -> None:
        """A put returns the new version (first modification 0, durable); get returns the
        value with that same version."""
        version = coordinator.put(space + "a", b"one")
        assert version.modifications_count == 0
        assert not version.is_ephemeral and version.session_id is None
        record = coordinator.get(space + "a")
        assert (record.key, record.value, record.version) == (space + "a", b"one", version)

    def test_get_of_an_absent_key_raises_key_not_found(
            self, coordinator: Coordinator, space: str) -> None:
        """get of a key that was never written (or was deleted) raises KeyNotFound."""
        with pytest.raises(KeyNotFound):
            coordinator.get(space + "never")
        coordinator.put(space + "gone", b"x")
        coordinator.delete(space + "gone")
        with pytest.raises(KeyNotFound):
            coordinator.get(space + "gone")

    def test_create_if_absent_succeeds_once(self, coordinator: Coordinator, space: str) -> None:
        """A put expecting no record creates it; a second one is refused and changes nothing."""
        first = coordinator.put(space + "owner", b"node-1",
                                expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST)
        with pytest.raises(UnexpectedVersionId):
            coordinator.put(space + "owner", b"node-2",
                            expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST)
        record = coordinator.get(space + "owner")
        assert (record.value, record.version) == (b"node-1", first)

    def test_update_if_version_refuses_a_stale_version(
            self, coordinator: Coordinator, space: str) -> None:
        """A put expecting the current version wins (a later version, one more modification,
        same creation time); one expecting the old version, or any version of an absent
        key, is refused."""
        key = space + "config"
        first = coordinator.put(key, b"v1")
        second = coordinator.put(key, b"v2", expected_version_id=first.version_id)
        assert second.version_id > first.version_id
        assert second.modifications_count == 1
        assert second.created_timestamp_ms == first.created_timestamp_ms
        with pytest.raises(UnexpectedVersionId):
            coordinator.put(key, b"stale", expected_version_id=first.version_id)
        with pytest.raises(UnexpectedVersionId):
            coordinator.put(space + "absent", b"x", expected_version_id=first.version_id)
        assert coordinator.get(key).value == b"v2"
        with pytest.raises(KeyNotFound):
            coordinator.get(space + "absent")

    def test_unconditional_put_overwrites_whatever_is_there(
            self, coordinator: Coordinator, space: str) -> None:
        """A put without an expected version replaces the record, whatever its version."""
        coordinator.put(space + "k", b"1")
        coordinator.put(space + "k", b"2")
        third = coordinator.put(space + "k", b"3")
        assert third.modifications_count == 2
        assert coordinator.get(space + "k").value == b"3"

    # delete -------------------------------------------------------------------------------
    def test_delete_says_whether_the_record_existed(
            self, coordinator: Coordinator, space: str) -> None:
        """delete returns True for a record it removed and False for an absent key."""
        coordinator.put(space + "d", b"x")
        assert coordinator.delete(space + "d") is True
        assert coordinator.delete(space + "d") is False

    def test_delete_with_a_version_deletes_only_that_version(
            self, coordinator: Coordinator, space: str) -> None:
        """A delete expecting a stale version is refused and the record stays; expecting the
        current one deletes it. Expecting a version of an absent key is refused; expecting
        no record of an absent key is False, of a present one refused."""
        key = space + "lease"
        first = coordinator.put(key, b"a")
        second = coordinator.put(key, b"b")
        with pytest.raises(UnexpectedVersionId):
            coordinator.delete(key, expected_version_id=first.version_id)
        with pytest.raises(UnexpectedVersionId):
            coordinator.delete(key, expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST)
        assert coordinator.get(key).version == second
        assert coordinator.delete(key, expected_version_id=second.version_id) is True
        with pytest.raises(UnexpectedVersionId):
            coordinator.delete(key, expected_version_id=second.version_id)
        assert coordinator.delete(key, expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST) \
            is False

    # ranges -------------------------------------------------------------------------------
    def test_list_and_range_scan_return_the_half_open_range_in_key_order(
            self, coordinator: Coordinator, space: str) -> None:
        """list gives the keys in [min, max) in order, range_scan the records; keys
        outside the range (or the prefix) are not included."""
        keys = [f"{space}k/{i:02d}" for i in (7, 3, 11, 0, 5)]
        for key in keys:
            coordinator.put(key, key.encode())
        coordinator.put(space + "l/00", b"other prefix")
        assert coordinator.list(*prefix_range(space + "k/")) == sorted(keys)
        assert coordinator.list(f"{space}k/03", f"{space}k/07") == \
            [f"{space}k/03", f"{space}k/05"]
        records = coordinator.range_scan(f"{space}k/05", f"{space}k/99")
        assert [(r.key, r.value) for r in records] == \
            [(k, k.encode()) for k in (f"{space}k/05", f"{space}k/07", f"{space}k/11")]
        assert all(r.version == coordinator.get(r.key).version for r in records)
        assert coordinator.list(f"{space}k/50", f"{space}k/60") == []
        assert coordinator.range_scan(*prefix_range(space + "none/")) == []

    def test_delete_range_deletes_exactly_the_range(
            self, coordinator: Coordinator, space: str) -> None:
        """delete_range removes the keys in [min, max) and nothing else."""
        for i in range(6):
            coordinator.put(f"{space}r/{i}", b"x")
        coordinator.put(space + "s/0", b"kept")
        coordinator.delete_range(f"{space}r/1", f"{space}r/4")
        assert coordinator.list(*prefix_range(space)) == \
            [f"{space}r/0", f"{space}r/4", f"{space}r/5", f"{space}s/0"]
        coordinator.delete_range(*prefix_range(space + "r/"))
        assert coordinator.list(*prefix_range(space)) == [space + "s/0"]

    # the fencing token --------------------------------------------------------------------
    def test_version_ids_strictly_increase_across_keys_and_clients(
            self, open_coordinator: MakeCoordinator, space: str) -> None:
        """Every put, by any client of the store, gets a version id larger than every put
        before it, on any key, deletes in between included: an ownership record made
        later always carries a larger token."""
        one, two = open_coordinator(), open_coordinator()
        versions: list[int] = []
        for i in range(10):
            writer = (one, two)[i % 2]
            versions.append(writer.put(f"{space}{i % 3}", b"x").version_id)
            if i % 4 == 3:
                writer.delete(f"{space}{i % 3}")
        owner = space + "shard/0/owner"
        versions.append(one.put(owner, b"node-1",
                                expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST).version_id)
        assert one.delete(owner, expected_version_id=versions[-1])
        versions.append(two.put(owner, b"node-2",
                                expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST).version_id)
        assert versions == sorted(set(versions)), versions

    # notifications ------------------------------------------------------------------------
    def test_notifications_report_changes_under_the_prefix_in_order(
            self, open_coordinator: MakeCoordinator, space: str) -> None:
        """A subscriber sees creates, modifications and deletes of keys under its prefix,
        made by any client, in the order they were made, each with the new version; it
        sees nothing of keys outside the prefix."""
        one, two = open_coordinator(), open_coordinator()
        watched = space + "nodes/"
        notifications = one.get_notifications(watched)
        created = two.put(watched + "a", b"1")
        one.put(space + "other/a", b"outside")
        one.put(space + "nodes", b"not under 'nodes/'")
        modified = one.put(watched + "a", b"2")
        two.put(watched + "b", b"1")
        two.delete(watched + "a")
        two.delete(space + "other/a")
        one.put(watched + "end", b"")
        seen = collect_until(notifications, watched + "end")
        assert changes(seen) == [(CREATED, watched + "a"), (MODIFIED, watched + "a"),
                                 (CREATED, watched + "b"), (DELETED, watched + "a"),
                                 (CREATED, watched + "end")]
        assert [n.version_id for n in seen[:2]] == [created.version_id, modified.version_id]
        assert seen[3].version_id is None

    def test_notifications_start_after_the_subscription(
            self, coordinator: Coordinator, space: str) -> None:
        """Changes made before subscribing are not reported; the first one after is."""
        coordinator.put(space + "before", b"x")
        notifications = coordinator.get_notifications(space)
        coordinator.put(space + "after", b"x")
        assert changes(collect_until(notifications, space + "after")) == \
            [(CREATED, space + "after")]

    def test_delete_range_is_notified(self, coordinator: Coordinator, space: str) -> None:
        """A range delete reports every deleted key under the prefix (one by one or as a
        range, as the backend does) and nothing for the keys it left."""
        keys = [f"{space}r/{i}" for i in range(4)]
        for key in keys:
            coordinator.put(key, b"x")
        notifications = coordinator.get_notifications(space)
        coordinator.delete_range(keys[1], keys[3])
        coordinator.put(space + "end", b"")
        seen = collect_until(notifications, space + "end")
        assert deleted_keys(seen, keys) == {keys[1], keys[2]}

    def test_a_closed_subscription_ends(self, coordinator: Coordinator, space: str) -> None:
        """After close, poll returns None and iteration stops, whatever is written."""
        notifications = coordinator.get_notifications(space)
        notifications.close()
        coordinator.put(space + "x", b"x")
        assert notifications.poll(0.2) is None
        assert list(notifications) == []
