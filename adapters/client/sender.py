"""The client's sender: one thread, owned by the client, that batches prepared commands
and appends them, like a Kafka producer's linger.

A command handed to ``send`` waits at most ``linger_s`` for others to join it (or until
``max_records`` / ``max_bytes`` are pending); the batch is split by shard and each shard's
part is one append (one group commit on the file log, one flush on Kafka, one round of
sends on Pulsar). A failed append is retried after the policy's backoff with the **same
prepared commands** (same ids, same bytes: the shard applies a copy once); when the policy
is spent, each command's future fails with ``RouteUnreachable`` carrying the commands.
While one append runs, new commands gather for the next, so a busy client batches even
with a linger of 0. ``send`` is safe from any thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Final

from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.client.errors import RouteUnreachable
from nereus.client.prepare import Prepared
from nereus.client.receipt import Receipt
from nereus.client.retry import RetryPolicy
from nereus.errors import EngineUnreachable, NereusError, ServiceUnreachable
from nereus.shard import ShardId

Append = Callable[[Sequence[Prepared]], list[Receipt]]
"""Appends commands of one shard, in order; one QUEUED receipt each."""

RETRIED: Final = (ServiceUnreachable, EngineUnreachable, OSError)
"""The failures worth another send: the log or the engine did not answer. Any other error
(a route mismatch, a diverged log, a refusal) fails the commands at once."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Batching:
    """``linger_s``: how long a command waits for others to join its batch (Kafka's
    ``linger.ms``); a batch goes as soon as it holds ``max_records`` or ``max_bytes``."""

    linger_s: float = 0.005
    max_records: int = 5_000
    max_bytes: int = 16 << 20


Outcome = Receipt | BaseException
Settled = list[tuple["asyncio.Future[Receipt]", Outcome]]


class LoopOutlet:
    """Settles an event loop's futures: one ``call_soon_threadsafe`` per shard's append,
    not one per command (a wake-up of the loop each is most of an asyncio client's cost)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def settle(self, done: Settled) -> None:
        self.loop.call_soon_threadsafe(_settle_all, done)


def _settle_all(done: Settled) -> None:
    for future, outcome in done:
        if future.done():  # its caller was cancelled: nobody waits for the answer
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


@dataclass(slots=True)
class _Pending:
    prepared: Prepared
    future: Future[Receipt] | asyncio.Future[Receipt]
    outlet: LoopOutlet | None  # None: a thread's future, settled where it is


class Sender:
    """The batching thread (module docstring). ``close`` sends what is pending, then stops."""

    def __init__(self, append: Append, *, batching: Batching, retry: RetryPolicy,
                 clock: Clock = SYSTEM_CLOCK, name: str = "nereus-client-sender") -> None:
        self._append = append
        self._batching = batching
        self._retry = retry
        self._clock = clock
        self._cond = threading.Condition()
        self._pending: list[_Pending] = []
        self._pending_bytes = 0
        self._closed = False
        self._stopping = threading.Event()
        self.appends = 0  # appends made (one per shard and batch): for tests and benches
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def send(self, prepared: Sequence[Prepared]) -> list[Future[Receipt]]:
        """Hand commands to the sender; a future each, resolved with its QUEUED receipt."""
        futures: list[Future[Receipt]] = [Future() for _ in prepared]
        self._add([_Pending(p, f, None) for p, f in zip(prepared, futures, strict=True)])
        return futures

    def send_from_loop(self, prepared: Sequence[Prepared], outlet: LoopOutlet
                       ) -> list[asyncio.Future[Receipt]]:
        """``send`` for an event loop: its own futures, settled on it in batches."""
        futures: list[asyncio.Future[Receipt]] = [outlet.loop.create_future() for _ in prepared]
        self._add([_Pending(p, f, outlet) for p, f in zip(prepared, futures, strict=True)])
        return futures

    def _add(self, items: list[_Pending]) -> None:
        with self._cond:
            if self._closed:
                raise NereusError("the client is closed")
            self._pending += items
            self._pending_bytes += sum(len(item.prepared.data) for item in items)
            self._cond.notify()

    def close(self, timeout_s: float | None = None) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._stopping.set()  # retries give up at once: their commands fail, carried
        self._thread.join(timeout_s)

    def _full(self) -> bool:
        return (len(self._pending) >= self._batching.max_records
                or self._pending_bytes >= self._batching.max_bytes)

    def _take(self) -> list[_Pending] | None:
        """The next batch, after its linger; None once closed and drained."""
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            if not self._pending:
                return None
            until = self._clock.monotonic() + self._batching.linger_s
            while not self._closed and not self._full():
                left = until - self._clock.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            batch = self._pending[:self._batching.max_records]
            self._pending = self._pending[len(batch):]
            self._pending_bytes -= sum(len(item.prepared.data) for item in batch)
            return batch

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            by_shard: dict[ShardId, list[_Pending]] = {}
            for item in batch:
                by_shard.setdefault(item.prepared.shard, []).append(item)
            for items in by_shard.values():
                self._deliver(items)

    def _deliver(self, items: list[_Pending]) -> None:
        """Append one shard's commands, retried by the policy; settle their futures."""
        prepared = [item.prepared for item in items]
        outcomes: list[Outcome]
        try:
            outcomes = list(self.append_with_retry(prepared))
        except BaseException as exc:  # every future hears of it; the thread goes on
            outcomes = [exc] * len(items)
        on_loops: dict[LoopOutlet, Settled] = {}
        for item, outcome in zip(items, outcomes, strict=True):
            if item.outlet is not None:
                assert isinstance(item.future, asyncio.Future)
                on_loops.setdefault(item.outlet, []).append((item.future, outcome))
            elif isinstance(outcome, BaseException):
                item.future.set_exception(outcome)
            else:
                item.future.set_result(outcome)
        for outlet, done in on_loops.items():
            outlet.settle(done)

    def append_with_retry(self, prepared: Sequence[Prepared]) -> list[Receipt]:
        """The same commands appended until acknowledged or the policy is spent."""
        started = self._clock.monotonic()
        backoffs = self._retry.backoffs()
        attempt = 0
        while True:
            attempt += 1
            try:
                self.appends += 1
                return self._append(prepared)
            except RETRIED as exc:
                pause = next(backoffs, None)
                spent = self._clock.monotonic() - started
                if pause is None or spent + pause > self._retry.deadline_s or \
                        self._clock.wait(self._stopping, pause):
                    raise _unreachable(prepared, attempt, exc) from exc


def _unreachable(prepared: Sequence[Prepared], attempts: int,
                 cause: BaseException) -> RouteUnreachable:
    why = cause.message if isinstance(cause, NereusError) else str(cause)
    return RouteUnreachable(
        f"{len(prepared)} command(s) for shard {prepared[0].shard} not acknowledged after "
        f"{attempts} append(s): {why}", prepared=prepared, attempts=attempts)
