"""``AsyncDelayClient``: the ``DelayClient`` for asyncio.

Schedules, cancels and reschedules are prepared on the event loop (checks and bytes: no
I/O once the route is learned) and awaited on the sender's futures, so any number of
concurrent tasks share batches. Anything that blocks (learning the route, a large
payload's upload, waiting for a result, a query barrier) runs on the client's own small
thread pool, shut down by ``close``. Use one client from one event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from nereus.adapters.client.appends import Via
from nereus.adapters.client.delay_client import DelayClient, Payload
from nereus.adapters.client.sender import Batching, LoopOutlet
from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.client import validate
from nereus.client.outcome import CommandResult
from nereus.client.prepare import Prepared, RouteRef
from nereus.client.receipt import Receipt
from nereus.client.retry import RetryPolicy
from nereus.client.validate import DelayLike, TimeLike
from nereus.views import MessageDetail

T = TypeVar("T")


class AsyncDelayClient:
    """Build with ``from_home`` or ``from_cluster``; ``async with`` it, or ``await close()``."""

    def __init__(self, client: DelayClient, *, threads: int = 4) -> None:
        self.sync = client
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="nereus-client")
        self._route: RouteRef | None = None
        self._outlet: LoopOutlet | None = None

    @classmethod
    def from_home(cls, path: Path | str, route: str = "default", *,
                  retry: RetryPolicy | None = None, batching: Batching | None = None,
                  clock: Clock = SYSTEM_CLOCK, via: Via = "auto") -> Self:
        """As ``DelayClient.from_home`` (reads the home's ``nereus.toml``)."""
        return cls(DelayClient.from_home(path, route, retry=retry, batching=batching,
                                         clock=clock, via=via))

    @classmethod
    def from_cluster(cls, coordinator_url: str, route: str = "default", *,
                     retry: RetryPolicy | None = None, batching: Batching | None = None,
                     clock: Clock = SYSTEM_CLOCK) -> Self:
        """As ``DelayClient.from_cluster`` (reads the cluster's configuration record)."""
        return cls(DelayClient.from_cluster(coordinator_url, route, retry=retry,
                                            batching=batching, clock=clock))

    async def route(self) -> RouteRef:
        """The route, learned once (on the pool: it reads the route's identity)."""
        if self._route is None:
            self._route = await self._blocking(lambda: self.sync.route)
        return self._route

    async def _blocking(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    async def schedule(self, id: str, lane: str, *, deliver_at: TimeLike | None = None,
                       delay: DelayLike | None = None, payload: Payload = b"",
                       key: str | None = None, headers: Mapping[str, str] | None = None,
                       expire_at: TimeLike | None = None,
                       command_id: str | None = None) -> Receipt:
        """As ``DelayClient.schedule``."""
        await self.route()
        if isinstance(payload, Path) or not validate.payload_size(len(payload),
                                                                  self.sync.limits):
            return await self._blocking(lambda: self.sync.schedule(
                id, lane, deliver_at=deliver_at, delay=delay, payload=payload, key=key,
                headers=headers, expire_at=expire_at, command_id=command_id))
        return await self.queue(self.sync.prepare_schedule(
            id, lane, deliver_at=deliver_at, delay=delay, payload=payload, key=key,
            headers=headers, expire_at=expire_at, command_id=command_id))

    async def cancel(self, id: str, *, command_id: str | None = None) -> Receipt:
        """As ``DelayClient.cancel`` (finding an ORDERED lane's message may ask the engine)."""
        await self.route()
        prepared = await self._blocking(lambda: self.sync.prepare_cancel(
            id, command_id=command_id))
        return await self.queue(prepared)

    async def reschedule(self, id: str, *, deliver_at: TimeLike | None = None,
                         delay: DelayLike | None = None, expire_at: TimeLike | None = None,
                         command_id: str | None = None) -> Receipt:
        """As ``DelayClient.reschedule``."""
        await self.route()
        prepared = await self._blocking(lambda: self.sync.prepare_reschedule(
            id, deliver_at=deliver_at, delay=delay, expire_at=expire_at,
            command_id=command_id))
        return await self.queue(prepared)

    async def queue(self, prepared: Prepared) -> Receipt:
        """As ``DelayClient.queue``: append a prepared command (a retry sends it again)."""
        if self._outlet is None:
            self._outlet = LoopOutlet(asyncio.get_running_loop())
        (future,) = self.sync.sender.send_from_loop([prepared], self._outlet)
        return await future

    async def result(self, receipt: Receipt, *, wait: float | timedelta | None = None
                     ) -> CommandResult:
        """As ``DelayClient.result``."""
        return await self._blocking(lambda: self.sync.result(receipt, wait=wait))

    async def get(self, id: str, *, wait: float | timedelta | None = None) -> MessageDetail:
        """As ``DelayClient.get``."""
        return await self._blocking(lambda: self.sync.get(id, wait=wait))

    async def close(self) -> None:
        """Send what is pending, then stop the sender and the pool."""
        await self._blocking(self.sync.close)
        self._pool.shutdown(wait=True)

    async def __aenter__(self) -> Self:
        await self.route()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()

