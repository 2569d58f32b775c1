"""A file lane fences its shard's previous writer, so an orphan absent from the outbox is
NOT_PUBLISHED with that evidence (``adapters/backends/destination/fencing.py``).

Two ``FileDestination`` objects on one outbox stand for two processes: a ``flock`` belongs
to an open file description, so the second is refused while the first holds the lock, as
another process would be. The kill -9 test runs a real engine in a child process
(``outbox_crash_worker.py``) whose destination writes half of its first publish and then
hangs, so attempts are in flight by construction when the child is SIGKILLed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nereus.adapters.backends.destination.fencing import FENCED_ABSENCE, NotFenced
from nereus.adapters.backends.destination.file_outbox import FileDestination
from nereus.adapters.backends.destination.protocol import PublishRequest
from nereus.publish import PublishTemplate
from nereus.records import Disposition, Outcome
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, Message, decode_value
from tests.integration.engine_harness import in_process_engine
from tests.polling import wait_until

SHARD = "default/0"
WORKER = Path(__file__).with_name("outbox_crash_worker.py")


def _request(n: int, shard: str = SHARD) -> PublishRequest:
    template = PublishTemplate(delay_message_id=f"m{n}", generation=1, lane="local",
                               deliver_at_ms=10**12, action_at_ms=10**12, key=None,
                               headers={}, payload=b"x")
    return PublishRequest(f"a{n}", template, f"mac{n}", shard=shard)


def _now() -> int:
    return 10**12


def test_absence_is_proven_only_once_the_old_writer_let_go(tmp_path: Path) -> None:
    """While the old writer holds the shard's lock the new one proves nothing (NotFenced,
    naming the lock); once it is gone, a written attempt is found and an unwritten one is
    absent with evidence of kind 'fenced absence (file writer lock)'."""
    path = tmp_path / "outbox.jsonl"
    old, new = FileDestination("local", path), FileDestination("local", path)
    assert new.fence(SHARD, {}, 0).found == {}  # an earlier owner's recovery
    new.close()
    results = old.publish([_request(1)], _now)
    assert [r.outcome for r in results] == [Outcome.PUBLISHED]
    with pytest.raises(NotFenced, match="holds the outbox writer lock"):
        new = FileDestination("local", path)
        new.fence(SHARD, {"a1": "mac1", "a2": "mac2"}, 0)
    old.close()  # the process died: the kernel dropped its lock
    fenced = new.fence(SHARD, {"a1": "mac1", "a2": "mac2"}, 0)
    assert set(fenced.found) == {"a1"} and fenced.found["a1"].startswith(f"{path}@0")
    assert fenced.absent.startswith(f"{FENCED_ABSENCE} (file writer lock): ")
    new.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_path_that_is_not_a_file_is_refused_at_once_never_waited_on(
        tmp_path: Path, kind: str) -> None:
    """A lane whose path is a FIFO (no reader) or a directory cannot be fenced: fence raises
    NotFenced saying so at once, and never blocks in open(2) (before: the recovery's fence
    of a FIFO lane hung until its 10 s deadline, per lane, holding the shard's activation
    and every healthy lane of it)."""
    import os

    path = tmp_path / "outbox.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    destination = FileDestination("local", path)
    try:
        with pytest.raises(NotFenced, match="is not a regular file"):
            destination.fence(SHARD, {}, 0)
    finally:
        destination.close()


def test_a_shard_another_writer_holds_is_not_written(tmp_path: Path) -> None:
    """A publish for a shard whose writer lock another writer holds writes nothing and is
    NOT_PUBLISHED LANE_UNAVAILABLE naming the lock, and the probe says NOT READY until the
    lock is free; another shard's goes through."""
    path = tmp_path / "outbox.jsonl"
    holder, other = FileDestination("local", path), FileDestination("local", path)
    holder.fence(SHARD, {}, 0)
    refused, written = other.publish([_request(1), _request(2, "default/1")], _now)
    assert (refused.outcome, refused.disposition) == \
        (Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE)
    assert "writer lock" in refused.evidence and written.outcome == Outcome.PUBLISHED
    assert [json.loads(line)["attempt_id"] for line in path.read_text().splitlines()] == ["a2"]
    assert "writer lock" in (other.probe() or "")  # NOT READY while the lock is held
    holder.close()
    assert other.probe() is None
    other.close()


@pytest.mark.parametrize("change", ["rotated", "cut", "never locked"])
def test_an_outbox_that_may_have_lost_lines_proves_nothing(tmp_path: Path, change: str) -> None:
    """An outbox replaced (rotated) or cut since the last writer took its lock, or never
    written under a lock, proves no absence: NotFenced saying which."""
    path = tmp_path / "outbox.jsonl"
    if change != "never locked":
        old = FileDestination("local", path)
        old.publish([_request(1), _request(2)], _now)
        old.close()
    else:
        path.write_text("")
    if change == "rotated":
        path.rename(tmp_path / "outbox.1.jsonl")
        path.write_text("")
    elif change == "cut":
        path.write_text(path.read_text().splitlines()[0] + "\n")
    new = FileDestination("local", path)
    with pytest.raises(NotFenced, match={"rotated": "replaced", "cut": "shorter",
                                         "never locked": "no earlier writer"}[change]):
        new.fence(SHARD, {"a3": "mac3"}, 0)
    new.close()


def crash(home: Path, count: int, lane: str | None = None) -> int:
    """Run an engine on ``home`` with ``count`` attempts PUBLISHING on lane ``local`` (the
    table ``lane``, default a file lane), some of them sent and the others not, SIGKILL it,
    and return how many were sent."""
    args = [sys.executable, str(WORKER), str(home), str(count), *([lane] if lane else [])]
    child = subprocess.Popen(args, stdout=subprocess.PIPE, cwd=Path(__file__).parents[2])
    try:
        assert child.stdout is not None
        line = child.stdout.readline().decode().split()  # bounded by the test's timeout
        assert line[:1] == ["ready"], line
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        return int(line[1])
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)


def settled_exactly(store: ShardStore, count: int, found: int, kind: str) -> None:
    """No attempt UNKNOWN or PUBLISHING, no message UNCERTAIN: ``found`` PUBLISHED, the
    others NOT_PUBLISHED with the fence's evidence of ``kind``."""
    attempts = [decode_value(raw, Attempt) for _, raw in store.scan_prefix(keys.ATTEMPT)]
    states = [str(a.state) for a in attempts]
    assert "UNKNOWN" not in states and "PUBLISHING" not in states, states
    assert states.count("PUBLISHED") == found, states
    absent = [a for a in attempts if a.state == "NOT_PUBLISHED"]
    assert len(absent) == count - found
    assert all(a.evidence.startswith(f"{FENCED_ABSENCE} ({kind})") for a in absent)
    messages = [decode_value(raw, Message) for _, raw in store.scan_prefix(keys.MSG)]
    assert all(m.state != "UNCERTAIN" for m in messages)


@pytest.mark.timeout(120)
def test_after_kill_9_no_attempt_of_a_file_lane_is_left_uncertain(tmp_path: Path) -> None:
    """After kill -9 with attempts in flight, the next owner's recovery settles every one:
    those in the outbox PUBLISHED (with their line), the others NOT_PUBLISHED with 'fenced
    absence' evidence (which `message explain` shows) — none UNKNOWN, no message
    UNCERTAIN — and each message is then in the outbox exactly once."""
    home = tmp_path / "home"
    written = crash(home, 12)
    assert 0 < written < 12
    with in_process_engine(home, partitions=1) as h:
        loop = h.engine.shards[next(iter(h.engine.shards))]
        settled_exactly(loop.store, 12, written, "file writer lock")
        absent = next(a for _, raw in loop.store.scan_prefix(keys.ATTEMPT)
                      if (a := decode_value(raw, Attempt)).state == "NOT_PUBLISHED")
        first = loop.explain(absent.delay_message_id).attempts[0]
        assert first.startswith(f"{absent.attempt_id} NOT_PUBLISHED: {FENCED_ABSENCE} (file")
        wait_until("every message in the outbox", lambda: len(h.outbox()) >= 12, 60)
        ids = [line["delay_message_id"] for line in h.outbox()]
        assert sorted(ids) == sorted(set(ids)) and len(ids) == 12
