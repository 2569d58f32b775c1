"""Asking for results: the engine that owns a shard answers through its admin socket.

A home's engine answers at ``<home>/run/admin.sock`` (a front door or a cluster node
forwards to the shard's owner on its host); a client built from a cluster asks the
shard's owner, named by its ownership record, at the admin socket its member record
gives, when that socket is on this host. ``command`` waits, with a deadline, until the
command's result exists; ``message`` asks behind a query barrier, so an answer is
conclusive for every command queued before it.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from nereus.adapters.admin.admin_client import AdminClient
from nereus.adapters.client.route_source import RouteSource
from nereus.adapters.offline.command_lookup import CommandStatus
from nereus.adapters.time_source import Clock
from nereus.client.errors import LaneFull, Rejected, ResultPending
from nereus.client.outcome import CommandResult
from nereus.client.receipt import Evidence, Receipt
from nereus.errors import EngineUnreachable, NotFound
from nereus.records.vocabulary import ResultStatus
from nereus.shard import ShardId
from nereus.views import MessageDetail

_FIRST_LOOK_S = 0.005
_MAX_LOOK_S = 0.2


class ResultQueries:
    """Result and message queries for one route (safe from any thread)."""

    def __init__(self, source: RouteSource, clock: Clock, *, timeout_s: float = 30.0) -> None:
        self._source = source
        self._clock = clock
        self._timeout_s = timeout_s

    def admin_for(self, shard: ShardId) -> AdminClient:
        """The admin client of the engine that answers for ``shard``."""
        layout = self._source.layout
        if layout is not None:
            return AdminClient(layout.run / "admin.sock", timeout=self._timeout_s)
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
        when the shard refused it, ``ResultPending`` when it is not applied in time."""
        shard = ShardId.parse(receipt.shard)
        admin = self.admin_for(shard)
        deadline = self._clock.monotonic() + wait_s
        look = _FIRST_LOOK_S
        while True:
            status = _command_status(admin, receipt.command_id)
            if status is not None and status.evidence == "APPLIED":
                return self._finished(admin, receipt, status)
            left = deadline - self._clock.monotonic()
            if left <= 0:
                raise ResultPending(
                    f"{receipt.kind} {receipt.command_id} is durable on shard {receipt.shard} "
                    f"at position {receipt.source_position} but not applied within {wait_s} s",
                    receipt=receipt, hint="ask again later: result(receipt), or `nereus "
                    f"command show {receipt.command_id}`; `nereus engine status` says whether "
                    "the shard is failed")
            self._clock.sleep(min(look, left))
            look = min(look * 2, _MAX_LOOK_S)

    def _finished(self, admin: AdminClient, queued: Receipt,
                  status: CommandStatus) -> CommandResult:
        receipt = applied_receipt(queued, status)
        message = None
        if status.delay_message_id is not None:
            try:
                message = msgspec.convert(admin.message(
                    status.delay_message_id, route=self._source.name, barrier=False),
                    MessageDetail)
            except NotFound:
                message = None
        result = CommandResult(receipt=receipt, message=message)
        if status.result == "REJECTED":
            raise (LaneFull if status.reason == "LANE_FULL" else Rejected)(result)
        return result

    def message(self, delay_message_id: str, shard: ShardId) -> MessageDetail:
        """The message behind a query barrier on its shard (every command queued before
        this call is applied first); ``NotFound`` when no shard holds it."""
        found = self.admin_for(shard).message(delay_message_id, route=self._source.name,
                                              barrier=True)
        return msgspec.convert(found, MessageDetail)


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
