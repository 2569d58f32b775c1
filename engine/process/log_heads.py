"""How far each shard's log reaches, as a report reads it: ``engine status``, the feed, the
dashboard and a Prometheus scrape ask every shard's log for its end position, and none of
them may hang on a log that does not answer.

A Kafka or Pulsar log asked while its broker is down waits up to its ``timeout_s`` (30 s)
before it fails, so a status document of two shards took a minute, every admin thread
that asked stayed blocked in the broker client, and a client polling status every 100 ms
(the 60 s Command Topic outage test, in CI) got no answer for two minutes after the broker
came back. Here each shard has at most one
question in flight, on a thread this object starts for it (a daemon: a question ends on its
log's own timeout, and a stopping process does not wait for it); a report waits for the
answer at most ``wait_s`` and otherwise says so (``error``), with the last answer and its
age. Later reports join the question in flight instead of asking again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Final, Protocol

from nereus.shard import ShardId

# how long one report waits for a shard's log to answer before it reports without the end
WAIT_S: Final = 2.0


class EndOfLog(Protocol):
    """What is asked of a shard's log: the position the next record will get."""

    def end_position(self) -> int: ...


@dataclass(frozen=True, slots=True)
class LogHead:
    """A shard log's end position as one report sees it: ``end`` is None, with ``error``
    saying why, when the log failed or did not answer within the wait."""

    end: int | None
    error: str | None


@dataclass(slots=True)
class _Asking:
    log: EndOfLog
    question: Future[int] | None = None
    answered: tuple[int, float] | None = None  # (end, monotonic time of the answer)


class LogHeads:
    """One bounded question per shard's log at a time; see the module docstring."""

    def __init__(self, *, wait_s: float = WAIT_S, monotonic: Callable[[], float]) -> None:
        """``monotonic``: the engine's Clock, for the age of the last answer."""
        self.wait_s = wait_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._shards: dict[ShardId, _Asking] = {}

    def read(self, logs: Iterable[tuple[ShardId, EndOfLog]]) -> dict[ShardId, LogHead]:
        """The end of each shard's log, or why it is not known: every log is asked at once,
        and all of them are waited for ``wait_s`` together."""
        asked = [(shard, *self._question(shard, log)) for shard, log in logs]
        # a wait for other threads: real time bounds it (the engine's Clock may be a test's
        # FakeClock that never moves, which waited for the shards one after another)
        deadline = time.monotonic() + self.wait_s
        return {shard: self._answer(question, asking, deadline - time.monotonic())
                for shard, question, asking in asked}

    def _answer(self, question: Future[int], asking: _Asking, wait_s: float) -> LogHead:
        try:
            end = question.result(timeout=max(wait_s, 0.0))
        except FutureTimeout:
            return LogHead(None, self._unanswered(asking))
        except Exception as exc:  # a damaged or unreachable log must not hide the rest
            return LogHead(None, f"{type(exc).__name__}: {exc}")
        with self._lock:
            asking.answered = (end, self._monotonic())
        return LogHead(end, None)

    def _question(self, shard: ShardId, log: EndOfLog) -> tuple[Future[int], _Asking]:
        with self._lock:
            asking = self._shards.get(shard)
            if asking is None or asking.log is not log:  # new, or reopened after a move
                asking = self._shards[shard] = _Asking(log)
            if asking.question is None or asking.question.done():
                asking.question = _ask(f"log-head-{shard}", log)
            return asking.question, asking

    def _unanswered(self, asking: _Asking) -> str:
        said = f"the log did not answer within {self.wait_s:g} s (still asking)"
        with self._lock:
            answered = asking.answered
        if answered is None:
            return said
        end, at = answered
        return f"{said}; its end was {end} {self._monotonic() - at:.0f} s ago"

    def forget(self, shard: ShardId) -> None:
        """``shard`` left this engine: drop what was asked of its log."""
        with self._lock:
            self._shards.pop(shard, None)



def _ask(name: str, log: EndOfLog) -> Future[int]:
    """``log.end_position()`` on a thread of its own; its answer or its exception."""
    question: Future[int] = Future()

    def run() -> None:
        try:
            question.set_result(log.end_position())
        except BaseException as exc:  # handed to the report that waits
            question.set_exception(exc)

    question.set_running_or_notify_cancel()
    threading.Thread(target=run, name=name, daemon=True).start()
    return question
