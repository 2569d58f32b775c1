"""A second process on the same coordinator, for the contract's multi-process promises.

The child side: ``python -m tests.integration.coordinator_child MODULE:FUNCTION ARGUMENT``
opens the coordinator with ``FUNCTION(ARGUMENT)`` (each backend's test module names its
opener: ``ChildOpener``), prints ``ready`` and then answers one line per command on stdin:

* ``race KEY NAME`` — put ``NAME`` at ``KEY`` only if absent: ``won VERSION`` or ``lost``;
* ``increment KEY COUNT PARTIES`` — once ``PARTIES`` processes have been given it (they
  meet under ``KEY/started/``), add 1 to the decimal counter at ``KEY`` ``COUNT`` times,
  each a read and a put conditional on the version read, retried when someone else wrote
  first: ``incremented CONFLICTS FIRST_VERSION LAST_VERSION`` (of its own puts). Every
  ``MEET_EVERY`` increments the parties meet between their read and their put (under
  ``KEY/meet/<i>/``), so they have all read the same version and all but one must retry:
  the writes interleave and conflict by construction, whatever the scheduler does (on a
  busy machine one process once finished all its increments before the other began);
* ``hold KEY TTL_MS`` — open a session and put an ephemeral record at ``KEY`` under it:
  ``held SESSION_ID``; later, by itself, ``lost`` once it finds the session is over.

End of input closes the coordinator and exits 0. The parent side is ``Child``: it starts
one, sends commands and waits for each answer under a deadline.
"""

from __future__ import annotations

import importlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nereus.coordination import (
    EXPECTED_RECORD_DOES_NOT_EXIST,
    Coordinator,
    KeyNotFound,
    Session,
    UnexpectedVersionId,
    prefix_range,
)

REPO = Path(__file__).resolve().parents[2]
ANSWER_DEADLINE_S = 30.0


@dataclass(frozen=True, slots=True)
class ChildOpener:
    """How a child process opens the same store as the test: ``function`` ("module:name",
    importable from the repository's root) called with ``argument``."""

    function: str
    argument: str


class Opener(Protocol):
    def __call__(self, argument: str, /) -> Coordinator: ...


# the child ---------------------------------------------------------------------------------
class _Replies:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sessions: list[Session] = []

    def say(self, *words: object) -> None:
        with self._lock:
            print(*words, flush=True)

    def watch(self, session: Session) -> None:
        """Say ``lost`` (once) when the session is found to be over."""
        self.sessions.append(session)

        def watcher() -> None:
            while not session.wait_lost(0.05):
                pass
            self.say("lost")

        threading.Thread(target=watcher, daemon=True).start()


MEET_EVERY = 10  # increments between two meetings of the writers (``increment``)


def _increment(coordinator: Coordinator, key: str, count: int,
               parties: int) -> tuple[int, list[int]]:
    conflicts, versions = 0, []
    for index in range(count):
        meet = index % MEET_EVERY == 0 or index == count - 1
        while True:
            try:
                record = coordinator.get(key)
                value, expected = int(record.value) + 1, record.version.version_id
            except KeyNotFound:
                value, expected = 1, EXPECTED_RECORD_DOES_NOT_EXIST
            if meet:  # every party has read before any puts: one wins, the others retry
                _barrier(coordinator, f"{key}/meet/{index}/", parties)
                meet = False
            try:
                versions.append(coordinator.put(key, str(value).encode(),
                                                expected_version_id=expected).version_id)
                break
            except UnexpectedVersionId:
                conflicts += 1
    return conflicts, versions


def _barrier(coordinator: Coordinator, prefix: str, parties: int) -> None:
    """Wait until ``parties`` processes have reached this point, so they start together."""
    coordinator.put(f"{prefix}{os.getpid()}", b"")
    deadline = time.monotonic() + ANSWER_DEADLINE_S
    while len(coordinator.list(*prefix_range(prefix))) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only some of {parties} processes reached {prefix!r}")
        time.sleep(0.001)


def _answer(coordinator: Coordinator, replies: _Replies, words: list[str]) -> None:
    match words:
        case ["race", key, name]:
            try:
                version = coordinator.put(key, name.encode(),
                                          expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST)
                replies.say("won", version.version_id)
            except UnexpectedVersionId:
                replies.say("lost")
        case ["increment", key, count, parties]:
            _barrier(coordinator, key + "/started/", int(parties))
            conflicts, versions = _increment(coordinator, key, int(count), int(parties))
            replies.say("incremented", conflicts, versions[0], versions[-1])
        case ["hold", key, ttl_ms]:
            session = coordinator.create_session(int(ttl_ms),
                                                 client_identity=f"child-{os.getpid()}")
            coordinator.put(key, b"held", ephemeral=session)
            replies.say("held", session.session_id)
            replies.watch(session)
        case _:
            replies.say("unknown", *words)


def main(argv: list[str]) -> int:
    module, _, name = argv[1].partition(":")
    opener: Opener = getattr(importlib.import_module(module), name)
    coordinator = opener(argv[2])
    replies = _Replies()
    replies.say("ready")
    try:
        for line in sys.stdin:
            _answer(coordinator, replies, line.split())
    finally:
        coordinator.close()
    return 0


# the parent --------------------------------------------------------------------------------
class Child:
    """A running child process, driven line by line."""

    def __init__(self, opener: ChildOpener) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.coordinator_child", opener.function,
             opener.argument],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            bufsize=0)
        self.expect("ready")

    def send(self, *words: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((" ".join(map(str, words)) + "\n").encode())

    def answer(self, deadline_s: float = ANSWER_DEADLINE_S) -> list[str]:
        """The next line the child printed, split into words."""
        stdout = self.proc.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], deadline_s)
        if not ready:
            raise AssertionError(f"the child said nothing for {deadline_s} s")
        raw = stdout.readline()
        if not raw:
            raise AssertionError(f"the child ended ({self.proc.wait()}): {self._stderr()}")
        return raw.decode().split()

    def expect(self, word: str, deadline_s: float = ANSWER_DEADLINE_S) -> list[str]:
        """The next answer, which must start with ``word``; its other words."""
        words = self.answer(deadline_s)
        assert words[:1] == [word], f"expected {word!r}, the child said {words}"
        return words[1:]

    def signal(self, signum: signal.Signals) -> None:
        self.proc.send_signal(signum)

    def finish(self) -> int:
        """Close its input (it closes its coordinator and exits); its exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=ANSWER_DEADLINE_S)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=ANSWER_DEADLINE_S)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def _stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")[-2_000:]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
