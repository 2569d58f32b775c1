"""The coordinator contract, part two: sessions, and what only other processes can show.

``CoordinatorContract`` (``coordinator_contract.py``) inherits this class; a backend
implements the hooks declared here. Expiry is on the backend's real clock, with a short
``session_ttl_ms``: a holder process that is killed or paused stops heartbeating, and its
ephemeral record must still be there right after, and gone within the TTL and a slack.
"""

from __future__ import annotations

import abc
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from nereus.coordination import (
    EXPECTED_RECORD_DOES_NOT_EXIST,
    Coordinator,
    KeyNotFound,
    NotificationType,
    SessionExpired,
)
from tests.integration.coordinator_child import MEET_EVERY, Child, ChildOpener
from tests.polling import wait_until

MakeCoordinator = Callable[[], Coordinator]
StartChild = Callable[[], Child]
EXPIRY_SLACK_S = 5.0  # after the TTL, how long a dead holder's records may take to go


def present(coordinator: Coordinator, key: str) -> bool:
    try:
        coordinator.get(key)
    except KeyNotFound:
        return False
    return True


class SessionsContract(abc.ABC):
    """Promises about sessions, ephemeral records and several processes on one store."""

    session_ttl_ms: ClassVar[int] = 2_000  # short, for the tests that wait for an expiry

    @abc.abstractmethod
    def make_coordinator(self, tmp_path: Path) -> Coordinator:
        """A client of the store that belongs to ``tmp_path`` (same path: same store)."""

    @abc.abstractmethod
    def child_opener(self, tmp_path: Path) -> ChildOpener:
        """How another process opens the store that belongs to ``tmp_path``."""

    @pytest.fixture
    def open_coordinator(self, tmp_path: Path) -> Iterator[MakeCoordinator]:
        """Opens clients of this test's store and closes them all at teardown."""
        opened: list[Coordinator] = []

        def opener() -> Coordinator:
            opened.append(self.make_coordinator(tmp_path))
            return opened[-1]

        yield opener
        for coordinator in opened:
            coordinator.close()

    @pytest.fixture
    def coordinator(self, open_coordinator: MakeCoordinator) -> Coordinator:
        return open_coordinator()

    @pytest.fixture
    def space(self) -> str:
        """This test's own key prefix (a store may outlive the test)."""
        return f"contract/{secrets.token_hex(6)}/"

    @pytest.fixture
    def start_child(self, tmp_path: Path) -> Iterator[StartChild]:
        """Starts child processes on this test's store; kills any left at teardown."""
        started: list[Child] = []

        def start() -> Child:
            started.append(Child(self.child_opener(tmp_path)))
            return started[-1]

        yield start
        for child in started:
            child.kill()

    # sessions in one process ---------------------------------------------------------------
    def test_an_ephemeral_record_carries_its_session(
            self, open_coordinator: MakeCoordinator, space: str) -> None:
        """A put in a session makes an ephemeral record naming the session and its holder,
        as every client of the store sees it."""
        one, two = open_coordinator(), open_coordinator()
        session = one.create_session(self.session_ttl_ms, client_identity="node-1")
        version = one.put(space + "member", b"n1", ephemeral=session)
        assert version.is_ephemeral
        assert (version.session_id, version.client_identity) == (session.session_id, "node-1")
        assert two.get(space + "member").version == version
        assert not session.lost()
        session.close()

    def test_closing_a_session_removes_its_records_at_once(
            self, open_coordinator: MakeCoordinator, space: str) -> None:
        """Closing a session deletes its ephemeral records before close returns (every
        client sees them gone, a subscriber is told), and leaves durable records alone."""
        one, two = open_coordinator(), open_coordinator()
        notifications = two.get_notifications(space)
        session = one.create_session(self.session_ttl_ms, client_identity="node-1")
        one.put(space + "e1", b"x", ephemeral=session)
        one.put(space + "e2", b"x", ephemeral=session)
        one.put(space + "durable", b"x")
        session.close()
        assert two.list(space, space + "~") == [space + "durable"]
        seen = [notifications.poll(EXPIRY_SLACK_S) for _ in range(5)]  # 3 creates, 2 deletes
        assert {(n.type, n.key) for n in seen[3:] if n is not None} == {
            (NotificationType.KEY_DELETED, space + "e1"),
            (NotificationType.KEY_DELETED, space + "e2")}

    def test_a_closed_session_can_no_longer_be_used(
            self, coordinator: Coordinator, space: str) -> None:
        """After close the session is lost: an ephemeral put in it and a keep-alive raise
        SessionExpired, and closing it again does nothing."""
        session = coordinator.create_session(self.session_ttl_ms, client_identity="node-1")
        session.close()
        assert session.lost()
        with pytest.raises(SessionExpired):
            coordinator.put(space + "late", b"x", ephemeral=session)
        with pytest.raises(SessionExpired):
            session.keep_alive()
        session.close()
        assert not present(coordinator, space + "late")

    def test_a_session_kept_alive_outlives_its_ttl(
            self, coordinator: Coordinator, space: str) -> None:
        """A session whose holder lives is kept alive by its own heartbeats: after twice
        its TTL it is not lost and its record is still there."""
        session = coordinator.create_session(self.session_ttl_ms, client_identity="node-1")
        coordinator.put(space + "member", b"x", ephemeral=session)
        before = session.certain_until_ms()
        assert not session.wait_lost(2 * self.session_ttl_ms / 1000)
        assert present(coordinator, space + "member")
        assert session.certain_until_ms() > before
        session.close()

    def test_a_durable_put_over_an_ephemeral_record_makes_it_durable(
            self, coordinator: Coordinator, space: str) -> None:
        """A put without a session replaces the record's session too: the record then
        survives the session's end."""
        session = coordinator.create_session(self.session_ttl_ms, client_identity="node-1")
        coordinator.put(space + "k", b"ephemeral", ephemeral=session)
        version = coordinator.put(space + "k", b"durable")
        assert not version.is_ephemeral
        session.close()
        assert coordinator.get(space + "k").value == b"durable"

    # holders in other processes ------------------------------------------------------------
    def test_the_record_of_a_killed_holder_vanishes_after_the_ttl_not_before(
            self, coordinator: Coordinator, space: str, start_child: StartChild) -> None:
        """A holder killed with SIGKILL stops heartbeating: its ephemeral record is still
        there right after (and for at least the part of the TTL its last heartbeat
        covers), then goes within the TTL and a slack, and a subscriber is told."""
        key = space + "member"
        holder = start_child()
        holder.send("hold", key, self.session_ttl_ms)
        holder.expect("held")
        notifications = coordinator.get_notifications(space)
        holder.signal(signal.SIGKILL)
        killed_at = time.monotonic()
        assert present(coordinator, key)
        wait_until("the dead holder's record is gone", lambda: not present(coordinator, key),
                   self.session_ttl_ms / 1000 + EXPIRY_SLACK_S)
        gone_at = time.monotonic()
        # heartbeats come at least three times per TTL, so the last one covered 2/3 of it
        assert gone_at - killed_at >= self.session_ttl_ms / 3 / 1000
        note = notifications.poll(EXPIRY_SLACK_S)
        assert note is not None
        assert (note.type, note.key) == (NotificationType.KEY_DELETED, key)

    def test_a_paused_holder_loses_its_session_and_another_takes_over(
            self, coordinator: Coordinator, space: str, start_child: StartChild) -> None:
        """A holder paused (SIGSTOP) past its TTL loses the session: its ownership record
        goes, another node creates it with a larger version, and when the holder resumes
        it finds its session lost."""
        key = space + "shard/0/owner"
        holder = start_child()
        holder.send("hold", key, self.session_ttl_ms)
        holder.expect("held")
        old = coordinator.get(key).version.version_id
        holder.signal(signal.SIGSTOP)
        wait_until("the paused holder's record is gone", lambda: not present(coordinator, key),
                   self.session_ttl_ms / 1000 + EXPIRY_SLACK_S)
        taken = coordinator.put(key, b"node-2", expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST)
        assert taken.version_id > old
        holder.signal(signal.SIGCONT)
        holder.expect("lost")
        assert coordinator.get(key).value == b"node-2"
        assert holder.finish() == 0

    def test_two_processes_racing_to_create_a_key_exactly_one_wins(
            self, coordinator: Coordinator, space: str, start_child: StartChild) -> None:
        """Two processes putting the same key "only if absent" at the same moment: exactly
        one wins, and the record holds the winner's value at the winner's version."""
        racers = {"a": start_child(), "b": start_child()}
        for round_ in range(20):
            key = f"{space}race/{round_}"
            for name, child in racers.items():
                child.send("race", key, name)
            answers = {name: child.answer() for name, child in racers.items()}
            winners = [name for name, words in answers.items() if words[0] == "won"]
            assert len(winners) == 1, answers
            assert [w[0] for w in answers.values()].count("lost") == 1, answers
            record = coordinator.get(key)
            assert record.value == winners[0].encode()
            assert record.version.version_id == int(answers[winners[0]][1])
        assert [child.finish() for child in racers.values()] == [0, 0]

    def test_concurrent_writers_in_two_processes_lose_no_update(
            self, coordinator: Coordinator, space: str, start_child: StartChild) -> None:
        """Two processes each adding 1 to one counter 150 times by read and conditional
        put (retrying when refused), at the same time, end with the counter at 300: no
        update is lost. Their writes interleave and conflict by construction, not by the
        scheduler's grace: every ten increments both read the counter before either puts
        (``coordinator_child``), so one of them is refused each time."""
        key = space + "counter"
        writers = [start_child(), start_child()]
        for child in writers:
            child.send("increment", key, 150, len(writers))
        answers = [[int(w) for w in child.expect("incremented")] for child in writers]
        (conflicts_a, first_a, last_a), (conflicts_b, first_b, last_b) = answers
        assert first_a < last_b and first_b < last_a, f"the writers took turns: {answers}"
        assert conflicts_a + conflicts_b >= 150 // MEET_EVERY + 1, answers
        record = coordinator.get(key)
        assert int(record.value) == 300, answers
        assert record.version.modifications_count == 299
        assert [child.finish() for child in writers] == [0, 0]
