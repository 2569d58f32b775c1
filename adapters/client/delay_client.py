"""``DelayClient``: schedule, cancel and reschedule delayed messages from an application,
and ask for their results (``docs/client.md``).

Every call checks its input first (``nereus.client.validate``: the shard's rules, before
any I/O), prepares the command (``nereus.client.prepare``: shard, command id and bytes
fixed) and hands it to the client's sender, which batches and appends it, retrying the
same bytes by the ``RetryPolicy``. The answer is a QUEUED receipt; ``result`` waits for the
shard's APPLIED result, ``get`` reads the message behind a query barrier.

Thread safety: one ``DelayClient`` may be shared by any number of threads; concurrent
calls are batched together. Close it (or use it as a context manager) to send what is
pending and stop its sender thread.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Self

from nereus.adapters.client import route_source
from nereus.adapters.client.appends import RouteAppends, Via
from nereus.adapters.client.results import ResultQueries
from nereus.adapters.client.route_source import RouteSource
from nereus.adapters.client.sender import Append, Batching, Sender
from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.client import validate
from nereus.client.errors import InvalidInput
from nereus.client.outcome import CommandResult
from nereus.client.prepare import (
    Prepared,
    RouteRef,
    prepare_cancel,
    prepare_reschedule,
    prepare_schedule,
)
from nereus.client.receipt import Receipt
from nereus.client.retry import RetryPolicy
from nereus.client.validate import DelayLike, ScheduleFields, TimeLike
from nereus.errors import EngineUnreachable, NotFound
from nereus.machine.limits import Limits
from nereus.shard import ShardId
from nereus.views import MessageDetail

Payload = bytes | Path


class DelayClient:
    """A producer for one route (module docstring). Build it with ``from_home`` or
    ``from_cluster``."""

    def __init__(self, source: RouteSource, *, retry: RetryPolicy | None = None,
                 batching: Batching | None = None, clock: Clock = SYSTEM_CLOCK,
                 result_wait_s: float = 30.0, via: Via = "auto",
                 append: Append | None = None) -> None:
        """``via``: through the home's engine when it runs, or straight to the log
        (``nereus.adapters.client.appends``); ``append`` replaces both (a test wraps it to
        make an append fail)."""
        self._source = source
        self._clock = clock
        self.retry = retry or RetryPolicy()
        self.result_wait_s = result_wait_s
        self._sender = Sender(append or RouteAppends(source, via),
                              batching=batching or Batching(),
                              retry=self.retry, clock=clock)
        self._queries = ResultQueries(source, clock)

    @classmethod
    def from_home(cls, path: Path | str, route: str = "default", *,
                  retry: RetryPolicy | None = None, batching: Batching | None = None,
                  clock: Clock = SYSTEM_CLOCK, via: Via = "auto") -> Self:
        """A client of route ``route`` of the home at ``path`` (its ``nereus.toml``);
        ``via="log"`` appends straight to the Command Topic even when its engine runs."""
        return cls(route_source.from_home(path, route), retry=retry, batching=batching,
                   clock=clock, via=via)

    @classmethod
    def from_cluster(cls, coordinator_url: str, route: str = "default", *,
                     retry: RetryPolicy | None = None, batching: Batching | None = None,
                     clock: Clock = SYSTEM_CLOCK) -> Self:
        """A client of route ``route`` of the cluster whose coordinator is at
        ``coordinator_url`` (``etcd://``, ``oxia://`` or ``sqlite://``)."""
        return cls(route_source.from_cluster(coordinator_url, route), retry=retry,
                   batching=batching, clock=clock)

    @property
    def sender(self) -> Sender:
        """The batching thread (its ``appends`` count: how many appends were made)."""
        return self._sender

    @property
    def source(self) -> RouteSource:
        """Where the route was learned (its configuration, logs and coordinator)."""
        return self._source

    # what the route is -----------------------------------------------------------------
    @property
    def route(self) -> RouteRef:
        """The route as learned from its identity record and configuration."""
        return self._source.ref()

    @property
    def limits(self) -> Limits:
        """The route's limits (ids, headers, inline and large payload sizes)."""
        return self._source.limits

    # preparing: checks and bytes, no I/O beyond learning the route once ------------------
    def prepare_schedule(self, id: str, lane: str, *, deliver_at: TimeLike | None = None,
                         delay: DelayLike | None = None, payload: bytes = b"",
                         key: str | None = None, headers: Mapping[str, str] | None = None,
                         expire_at: TimeLike | None = None,
                         command_id: str | None = None) -> Prepared:
        """The SCHEDULE ``schedule`` would send (inline payloads only); its command id is
        derived from its content unless given, so preparing it again is the same command."""
        fields = self._schedule_fields(id, lane, deliver_at, delay, key, headers, expire_at)
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise InvalidInput(f"expected bytes, got {type(payload).__name__}",
                                        field="payload")
        if not validate.payload_size(len(payload), self.limits):
            raise InvalidInput(
                f"{len(payload)} bytes, over the inline limit of "
                f"{self.limits.max_inline_payload_bytes}", field="payload",
                hint="schedule() takes it through the object store")
        own_id = self._command_id(command_id)
        return prepare_schedule(
            self.route, command_id=own_id,
            delay_message_id=fields.delay_message_id, lane=fields.lane,
            deliver_at_ms=fields.deliver_at_ms, expire_at_ms=fields.expire_at_ms,
            key=fields.key, headers=fields.headers, payload=bytes(payload))

    def _schedule_fields(self, id: str, lane: str, deliver_at: TimeLike | None,
                         delay: DelayLike | None, key: str | None,
                         headers: Mapping[str, str] | None,
                         expire_at: TimeLike | None) -> ScheduleFields:
        limits = self.limits
        deliver_at_ms = validate.delivery_ms(self._clock.wall_ms(), deliver_at, delay)
        expire_at_ms = None if expire_at is None else validate.time_ms(expire_at, "expire_at")
        plain = validate.message_fields(deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms,
                                        key=key, headers=headers, limits=limits)
        return ScheduleFields(
            delay_message_id=validate.identifier(id, "id", limits),
            lane=validate.lane_name(lane, self._source.lanes, self._source.source),
            deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms, key=key, headers=plain)

    def _command_id(self, given: str | None) -> str | None:
        return None if given is None else validate.identifier(given, "command_id",
                                                              self.limits)

    def prepare_cancel(self, id: str, *, command_id: str | None = None) -> Prepared:
        """A CANCEL for message ``id`` on the shard that holds it."""
        limits = self.limits
        delay_message_id = validate.identifier(id, "id", limits)
        own_id = self._command_id(command_id) or str(uuid.uuid4())
        return prepare_cancel(self.route, command_id=own_id, delay_message_id=delay_message_id,
                              shard=self._message_shard(delay_message_id))

    def prepare_reschedule(self, id: str, *, deliver_at: TimeLike | None = None,
                           delay: DelayLike | None = None, expire_at: TimeLike | None = None,
                           command_id: str | None = None) -> Prepared:
        """A RESCHEDULE of message ``id`` to a new delivery time."""
        limits = self.limits
        delay_message_id = validate.identifier(id, "id", limits)
        deliver_at_ms = validate.delivery_ms(self._clock.wall_ms(), deliver_at, delay)
        expire_at_ms = None if expire_at is None else validate.time_ms(expire_at, "expire_at")
        validate.message_fields(deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms,
                                key=None, headers=None, limits=limits)
        own_id = self._command_id(command_id) or str(uuid.uuid4())
        return prepare_reschedule(
            self.route, command_id=own_id,
            delay_message_id=delay_message_id, deliver_at_ms=deliver_at_ms,
            expire_at_ms=expire_at_ms, shard=self._message_shard(delay_message_id))

    def _message_shard(self, delay_message_id: str) -> ShardId:
        """The shard holding the message: its id's, unless an ORDERED lane may have placed
        it by key elsewhere; then the engine is asked behind a query barrier."""
        route = self.route
        home = route.shard_for(delay_message_id)
        if not route.ordered_lanes or route.partitions == 1:
            return home
        try:
            return ShardId.parse(self._queries.message(delay_message_id, home).shard)
        except (NotFound, EngineUnreachable):
            return home

    # sending ---------------------------------------------------------------------------
    def schedule(self, id: str, lane: str, *, deliver_at: TimeLike | None = None,
                 delay: DelayLike | None = None, payload: Payload = b"",
                 key: str | None = None, headers: Mapping[str, str] | None = None,
                 expire_at: TimeLike | None = None, command_id: str | None = None) -> Receipt:
        """Schedule message ``id`` on ``lane`` for ``deliver_at`` (or after ``delay``); the
        QUEUED receipt. A payload above the inline limit (or a ``Path``) is reserved,
        uploaded, attested and committed on the message's shard first."""
        if isinstance(payload, Path) or (
                isinstance(payload, bytes | bytearray | memoryview) and
                not validate.payload_size(len(payload), self.limits)):
            return self._schedule_large(id, lane, deliver_at, delay, payload, key, headers,
                                        expire_at)
        return self.queue(self.prepare_schedule(
            id, lane, deliver_at=deliver_at, delay=delay, payload=payload, key=key,
            headers=headers, expire_at=expire_at, command_id=command_id))

    def cancel(self, id: str, *, command_id: str | None = None) -> Receipt:
        """Cancel message ``id`` (it wins only before the message's Publish Admission)."""
        return self.queue(self.prepare_cancel(id, command_id=command_id))

    def reschedule(self, id: str, *, deliver_at: TimeLike | None = None,
                   delay: DelayLike | None = None, expire_at: TimeLike | None = None,
                   command_id: str | None = None) -> Receipt:
        """Move message ``id`` to a new delivery time (only before its admission)."""
        return self.queue(self.prepare_reschedule(id, deliver_at=deliver_at, delay=delay,
                                                  expire_at=expire_at, command_id=command_id))

    def queue(self, prepared: Prepared) -> Receipt:
        """Append a prepared command (a retry of one a ``RouteUnreachable`` carried: the
        same command, applied once); its QUEUED receipt."""
        return self.send([prepared])[0].result()

    def queue_many(self, prepared: Sequence[Prepared]) -> list[Receipt]:
        """Append many prepared commands (batched per shard); their receipts, in order
        (the first failure in that order is raised)."""
        return [future.result() for future in self.send(prepared)]

    def send(self, prepared: Sequence[Prepared]) -> list[Future[Receipt]]:
        """Hand commands to the sender without waiting: a future each."""
        return self._sender.send(prepared)

    def _schedule_large(self, id: str, lane: str, deliver_at: TimeLike | None,
                        delay: DelayLike | None, payload: Payload, key: str | None,
                        headers: Mapping[str, str] | None,
                        expire_at: TimeLike | None) -> Receipt:
        from nereus.adapters.client.large import schedule_large

        fields = self._schedule_fields(id, lane, deliver_at, delay, key, headers, expire_at)
        if isinstance(payload, Path):
            return schedule_large(self._source, self, fields, payload, self._clock.wall_ms())
        handle, name = tempfile.mkstemp(prefix="nereus-payload-")
        try:
            with os.fdopen(handle, "wb") as spool:
                spool.write(payload)
            return schedule_large(self._source, self, fields, Path(name),
                                  self._clock.wall_ms())
        finally:
            os.unlink(name)

    # results ---------------------------------------------------------------------------
    def result(self, receipt: Receipt, *, wait: float | timedelta | None = None
               ) -> CommandResult:
        """The shard's result for a queued command, waiting up to ``wait`` (default
        ``result_wait_s``): APPLIED with the message's state and attempts; ``Rejected``
        (``LaneFull``) when refused; ``ResultPending`` when not applied in time."""
        return self._queries.command(receipt, self._seconds(wait))

    def get(self, id: str, *, wait: float | timedelta | None = None) -> MessageDetail:
        """Message ``id`` as its shard holds it, behind a query barrier (conclusive for
        every command queued before): its state, generation and attempts with their
        evidence. ``NotFound`` when no shard holds it; ``ResultNotKnown`` (exit 6) when the
        barrier is not answered within ``wait`` (default ``result_wait_s``)."""
        delay_message_id = validate.identifier(id, "id", self.limits)
        return self._queries.message(delay_message_id,
                                     self.route.shard_for(delay_message_id),
                                     self._seconds(wait))

    def _seconds(self, wait: float | timedelta | None) -> float:
        if wait is None:
            return self.result_wait_s
        return wait.total_seconds() if isinstance(wait, timedelta) else float(wait)

    # lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        """Send what is pending, stop the sender, close the logs."""
        self._sender.close()
        self._source.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
