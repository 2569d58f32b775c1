"""What others wait for on a shard loop: its state, its applied position, its results.

One condition guards them all. The loop notifies it on every applied batch and every state
change; ``ShardLoop.wait_active``, ``wait_applied``, ``wait_drained`` and ``await_result``
block on it. Whether a wait's deadline has passed is read from the engine's Clock; the
condition's own timeout only bounds how long one wait blocks between two readings.

``ResultWatch`` keeps, while a client waits, the results the loop applies, so the admin API
answers a command with the result as the loop applied it (no store read).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from nereus.adapters.time_source import Clock
from nereus.engine.shard.loop_status import ENDED_STATES, SETTLED_STATES, ShardState
from nereus.state.values import Result

RECENT_RESULTS = 4_096  # results kept for waiting clients beyond the ones they expect


class AppliedLog(Protocol):
    """Where the loop's applied position is read (its ``ShardRunner``)."""

    @property
    def next_position(self) -> int:
        """The position after the last applied and synced record."""
        ...


class ShardProgress:
    """A shard loop's state and applied position, and the condition its waiters use."""

    def __init__(self, applied: AppliedLog, time: Clock) -> None:
        self.changed = threading.Condition()  # notified on every applied batch and state change
        self._state = ShardState.STARTING
        self._applied = applied
        self._time = time

    @property
    def state(self) -> ShardState:
        return self._state

    @state.setter
    def state(self, state: ShardState) -> None:
        with self.changed:
            self._state = state
            self.changed.notify_all()

    @property
    def ended(self) -> bool:
        """The loop applies nothing more (FAILED, STOPPED or FENCED)."""
        return self._state in ENDED_STATES

    def applied(self, position: int) -> bool:
        """``position`` is applied and synced."""
        return self._applied.next_position > position

    def notify(self) -> None:
        """Wake every waiter to look again (a batch was applied, or the loop ended)."""
        with self.changed:
            self.changed.notify_all()

    def wait_until(self, done: Callable[[], bool], deadline: float, *, step_s: float,
                   until_ended: bool) -> bool:
        """Block until ``done()`` holds; when the Clock's ``monotonic`` reads ``deadline``
        (or, with ``until_ended``, once the loop has ended) return ``done()`` as it is."""
        with self.changed:
            while not done():
                remaining = deadline - self._time.monotonic()
                if remaining <= 0 or (until_ended and self.ended):
                    return done()
                self.changed.wait(min(remaining, step_s))
        return True


class ResultWatch:
    """While a client waits (``watching``), the results the loop applies: by the positions
    it expects (None until applied), and the most recent others (a record can be applied
    between its append and the client's ``expect``).

    Guarded by the progress condition; the apply observer reads ``watchers`` without it.
    """

    def __init__(self, progress: ShardProgress, time: Clock) -> None:
        self.watchers = 0
        self._progress = progress
        self._time = time
        self._awaited: dict[int, Result | None] = {}
        self._recent: OrderedDict[int, Result] = OrderedDict()

    @contextmanager
    def watching(self) -> Iterator[None]:
        """While inside, keep the results the loop applies for ``expect`` and
        ``await_result`` (enter it before appending what you will wait for)."""
        with self._progress.changed:
            self.watchers += 1
        try:
            yield
        finally:
            with self._progress.changed:
                self.watchers -= 1
                if not self.watchers:
                    self._recent.clear()

    def expect(self, positions: Sequence[int]) -> None:
        """Keep the results the loop applies at ``positions`` for ``await_result``."""
        with self._progress.changed:
            for position in positions:
                self._awaited[position] = self._recent.pop(position, None)

    def caught(self, results: Sequence[tuple[int, Result]]) -> None:
        """Results the loop just applied and synced while someone was watching."""
        awaited, recent = self._awaited, self._recent
        with self._progress.changed:
            for position, result in results:
                if position in awaited:
                    awaited[position] = result
                elif self.watchers:
                    recent[position] = result
            while len(recent) > RECENT_RESULTS:
                recent.popitem(last=False)

    def await_result(self, position: int, deadline: float) -> Result | None:
        """The result the loop applied (and synced) at an ``expect``-ed position, as it
        applied it — no store read — or None when the monotonic ``deadline`` passes, the
        loop ends first, or the position was applied before it was expected (the caller
        then reads the stored result). The position is forgotten either way."""
        progress = self._progress
        with progress.changed:
            try:
                while (found := self._awaited.get(position)) is None:
                    if position not in self._awaited or progress.ended or \
                            progress.applied(position):
                        return self._awaited.get(position)
                    remaining = deadline - self._time.monotonic()
                    if remaining <= 0:
                        return None
                    progress.changed.wait(min(remaining, 0.1))
                return found
            finally:
                self._awaited.pop(position, None)


class ProgressWaits:
    """What a client sees and waits for on a shard loop: its state, recovery ended, a
    position applied, the results it applied (the loop's ``_progress``, ``_results`` and
    ``_time`` are these)."""

    _progress: ShardProgress
    _results: ResultWatch
    _time: Clock

    @property
    def state(self) -> ShardState:
        return self._progress.state

    @state.setter
    def state(self, state: ShardState) -> None:
        self._progress.state = state

    def wait_active(self, timeout_s: float) -> bool:
        """Block until recovery ended: True when ACTIVE (FAILED, FENCED, timeout: False)."""
        settled = self._progress.wait_until(
            lambda: self.state in SETTLED_STATES, self._time.monotonic() + timeout_s,
            step_s=0.1, until_ended=False)
        return settled and self.state == ShardState.ACTIVE

    def wait_applied(self, position: int, timeout_s: float) -> bool:
        """Block until ``position`` is applied and synced (or the timeout passes)."""
        return self._progress.wait_until(
            lambda: self._progress.applied(position), self._time.monotonic() + timeout_s,
            step_s=0.1, until_ended=True)

    def watching(self) -> AbstractContextManager[None]:
        """While inside, the loop keeps the results it applies for ``expect`` and
        ``await_result`` (enter it before appending what you will wait for)."""
        return self._results.watching()

    def expect(self, positions: Sequence[int]) -> None:
        """Keep the results the loop applies at ``positions`` for ``await_result``."""
        self._results.expect(positions)

    def await_result(self, position: int, deadline: float) -> Result | None:
        """The result the loop applied (and synced) at an ``expect``-ed position, as it
        applied it — no store read — or None when the monotonic ``deadline`` passes, the
        loop ends first, or the position was applied before it was expected (the caller
        then reads the stored result). The position is forgotten either way."""
        return self._results.await_result(position, deadline)
