"""Asking for results: the engine that owns a shard answers through its admin socket.

A home's engine answers at ``<home>/run/admin.sock`` (a front door or a cluster node
forwards to the shard's owner on its host); a client built from a cluster asks the
shard's owner, named by its ownership record, at the admin socket its member record
gives, when that socket is on this host. ``command`` waits, with a deadline, until the
command's result exists; ``message`` asks behind a query barrier, so an answer is
conclusive for every command queued before it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from nereus.adapters.admin.admin_client import AdminClient, NotListening
from nereus.adapters.client.route_source import RouteSource
from nereus.adapters.offline.command_lookup import CommandStatus
from nereus.adapters.time_source import Clock
from nereus.client.errors import LaneFull, Rejected, ResultPending
from nereus.client.outcome import CommandResult
from nereus.client.receipt import Evidence, Receipt
from nereus.errors import (
    EngineUnreachable,
    NotFound,
    ResultNotKnown,
    ShardNotHere,
    UsageError,
)
from nereus.records.vocabulary import ResultStatus
from nereus.shard import ShardId
from nereus.views import MessageDetail

_LOOK_S = 0.05  # between two looks at a command whose barrier was answered before it
WORKERS_CLUSTER: Final = "workers"  # a home's worker processes in <home>/coordinator.db


class ResultQueries:
    """Result and message queries for one route (safe from any thread)."""

    def __init__(self, source: RouteSource, clock: Clock, *, timeout_s: float = 30.0) -> None:
        self._source = source
        self._clock = clock
        self._timeout_s = timeout_s
        self._barriers = SharedBarriers(clock)
        self._workers = WorkerSockets(source, clock)

    def admin_for(self, shard: ShardId) -> AdminClient:
        """The admin client of the engine that answers for ``shard``: a home's worker
        process that owns it (``engine start --workers N``: asked directly, a command
        lookup is not fanned out to every worker by the front door), else the home's
        engine; for a cluster, the owner node on this host."""
        layout = self._source.layout
        if layout is not None:
            worker = self._workers.socket_of(shard)
            path = worker if worker is not None else layout.run / "admin.sock"
            return AdminClient(path, timeout=self._timeout_s)
        from nereus.adapters.cluster.cluster_store import ClusterStore

        assert self._source.cluster is not None
        store = ClusterStore(self._source.cluster)
        owned = store.owners().get(shard)
        if owned is None:
            raise EngineUnreachable(f"no node owns shard {shard} right now",
                                    hint="try again in a few seconds; `nereus cluster status`")
        member = store.members().get(owned.record.node_id)
        if member is None or not Path(member.address).exists():
            where = "" if member is None else f" on host {member.host}"
            raise EngineUnreachable(
                f"shard {shard}'s owner is node {owned.record.node_id}{where}, whose admin "
                "socket is not on this host", hint="ask for results on that host (the "
                "receipt's command id: `nereus command show ID` there)")
        return AdminClient(Path(member.address), timeout=self._timeout_s)

    def command(self, receipt: Receipt, wait_s: float) -> CommandResult:
        """The command's applied result, waiting up to ``wait_s``; ``Rejected`` (``LaneFull``)
        when the shard refused it, ``ResultPending`` when it is not applied in time.

        A query barrier behind the command is waited for (the engine appends it and wakes
        the shard; concurrent callers share one barrier per shard): once it is applied so
        is the command, whose stored result is then read without touching the log. Polling
        the command instead would read the unapplied part of the Shard Log through the
        shard's own reader, moving it under the loop."""
        shard = ShardId.parse(receipt.shard)
        admin = self.admin_for(shard)
        since = self._clock.monotonic()
        deadline = since + wait_s
        while True:
            seen: list[MessageDetail | None] = []  # the message, if this call's barrier ran
            if receipt.delay_message_id is not None:
                left = max(deadline - self._clock.monotonic(), 0.05)
                barrier = functools.partial(self._behind_barrier, admin, receipt, seen=seen)
                if not self._barriers.wait(shard, since, left, barrier):
                    raise _pending(receipt, wait_s)
            status = _command_status(admin, receipt.command_id)
            if status is not None and status.evidence == "APPLIED":
                # read behind this call's barrier, or now: after the command's effect
                message = seen[0] if seen else self._message_now(admin, receipt)
                return _finished(receipt, status, message)
            left = deadline - self._clock.monotonic()
            if left <= 0:
                raise _pending(receipt, wait_s)
            self._clock.sleep(min(_LOOK_S, left))
            since = self._clock.monotonic()

    def _message_now(self, admin: AdminClient, receipt: Receipt) -> MessageDetail | None:
        """The command's message as its shard holds it now (None if none does)."""
        if receipt.delay_message_id is None:
            return None
        try:
            return msgspec.convert(admin.message(receipt.delay_message_id,
                                                 route=self._source.name, barrier=False),
                                   MessageDetail)
        except NotFound:
            return None

    def _behind_barrier(self, admin: AdminClient, receipt: Receipt, timeout_s: float,
                        seen: list[MessageDetail | None]) -> bool:
        """Whether a query barrier appended now to the shard of ``receipt``'s message was
        applied within ``timeout_s``; the message as read behind it goes to ``seen``."""
        assert receipt.delay_message_id is not None
        waiting = AdminClient(admin.path, timeout=timeout_s)
        try:
            seen.append(msgspec.convert(waiting.message(
                receipt.delay_message_id, route=self._source.name, barrier=True),
                MessageDetail))
        except NotFound:
            seen.append(None)  # no message: the barrier was applied all the same
            return True
        except (NotListening, ShardNotHere):
            raise
        except (EngineUnreachable, UsageError):  # no answer in time, or the barrier's own
            return False  # 30 s ran out
        return True

    def message(self, delay_message_id: str, shard: ShardId,
                wait_s: float | None = None) -> MessageDetail:
        """The message behind a query barrier on its shard (every command queued before
        this call is applied first; an ORDERED lane's keyed message is looked for on the
        route's other shards too); ``NotFound`` when no shard holds it, ``ResultNotKnown``
        when the barrier is not applied within ``wait_s``."""
        admin = self.admin_for(shard)
        waiting = admin if wait_s is None else AdminClient(admin.path, timeout=wait_s)
        try:
            found = waiting.message(delay_message_id, route=self._source.name, barrier=True)
        except (NotListening, ShardNotHere, NotFound):
            raise
        except (EngineUnreachable, UsageError) as exc:  # no answer in time
            raise ResultNotKnown(f"message {delay_message_id}: the query barrier on shard "
                                 f"{shard} was not answered in time ({exc.message})",
                                 hint="ask again later") from None
        return msgspec.convert(found, MessageDetail)


class WorkerSockets:
    """Which worker process of a home owns which shard (the home's embedded coordinator,
    read again at most every ``ttl_s``); nothing for a home without workers or a node's."""

    def __init__(self, source: RouteSource, clock: Clock, ttl_s: float = 1.0) -> None:
        self._source = source
        self._clock = clock
        self._ttl_s = ttl_s
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._sockets: dict[ShardId, Path] = {}

    def socket_of(self, shard: ShardId) -> Path | None:
        layout = self._source.layout
        if layout is None or self._source.config.cluster is not None or \
                not layout.coordinator.exists():
            return None
        with self._lock:
            now = self._clock.monotonic()
            if self._read_at is None or now - self._read_at > self._ttl_s:
                self._sockets = _worker_sockets(layout.coordinator)
                self._read_at = now
            found = self._sockets.get(shard)
        return found if found is not None and found.exists() else None


def _worker_sockets(coordinator: Path) -> dict[ShardId, Path]:
    """Each shard's owning worker's admin socket, as the embedded coordinator says."""
    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.adapters.cluster.coordinator_url import open_cluster, sqlite_url

    handle = open_cluster(sqlite_url(coordinator, WORKERS_CLUSTER))
    try:
        store = ClusterStore(handle)
        members = store.members()
        return {shard: Path(members[owned.record.node_id].address)
                for shard, owned in store.owners().items()
                if owned.record.node_id in members}
    finally:
        handle.close()


class _Flight:
    def __init__(self, started: float) -> None:
        self.started = started
        self.done = threading.Event()
        self.applied = False
        self.error: BaseException | None = None


class SharedBarriers:
    """At most one query barrier in flight per shard, shared by every caller it covers: a
    barrier started after a caller began waiting was appended after that caller's command,
    so its being applied means the command is too (group commit, for barriers)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._flights: dict[ShardId, _Flight] = {}

    def wait(self, shard: ShardId, since: float, timeout_s: float,
             run: Callable[[float], bool]) -> bool:
        """Wait for a barrier on ``shard`` started at or after ``since``: the one in
        flight, or one ``run(timeout_s)`` appends and waits for now. Whether it was applied
        within ``timeout_s``."""
        with self._lock:
            flight = self._flights.get(shard)
            mine = flight is None or flight.started < since
            if mine:
                flight = self._flights[shard] = _Flight(self._clock.monotonic())
        assert flight is not None
        if not mine:
            if not flight.done.wait(timeout_s):
                return False
            if flight.error is not None:
                raise flight.error
            return flight.applied
        try:
            flight.applied = run(timeout_s)
            return flight.applied
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            flight.done.set()
            with self._lock:
                if self._flights.get(shard) is flight:
                    del self._flights[shard]


def _finished(queued: Receipt, status: CommandStatus,
              message: MessageDetail | None) -> CommandResult:
    """The result; ``Rejected`` (``LaneFull``) raised for a refusal."""
    result = CommandResult(receipt=applied_receipt(queued, status), message=message)
    if status.result == "REJECTED":
        raise (LaneFull if status.reason == "LANE_FULL" else Rejected)(result)
    return result


def _pending(receipt: Receipt, wait_s: float) -> ResultPending:
    return ResultPending(
        f"{receipt.kind} {receipt.command_id} is durable on shard {receipt.shard} at position "
        f"{receipt.source_position} but not applied within {wait_s:g} s", receipt=receipt,
        hint=f"ask again later: result(receipt), or `nereus command show "
        f"{receipt.command_id}`; `nereus engine status` says whether the shard is failed")


def applied_receipt(queued: Receipt, status: CommandStatus) -> Receipt:
    """``queued`` once applied, from the shard's stored result (``status``): a copy the log
    took twice names where the first was applied (``duplicate_of``)."""
    first = status.source_position
    return msgspec.structs.replace(
        queued, evidence=Evidence.APPLIED, kind=status.kind or queued.kind,
        delay_message_id=status.delay_message_id,
        result=ResultStatus(status.result or ResultStatus.APPLIED),
        reason=status.reason, detail=status.detail, position=first,
        generation=status.generation, attempt_id=status.attempt_id,
        duplicate_of=None if first == queued.source_position else first)


def _command_status(admin: AdminClient, command_id: str) -> CommandStatus | None:
    from urllib.parse import quote

    try:
        found = admin.get(f"/v1/commands/{quote(command_id, safe='')}")
    except NotFound:
        return None  # not in the log the engine reads yet (an append it has not seen)
    return msgspec.convert(found, CommandStatus)
