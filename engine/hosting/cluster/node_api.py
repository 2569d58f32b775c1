"""A cluster node's admin socket: its own shards answered here, every other shard's
per-shard requests asked of that shard's owner.

The owner is found in the coordinator (its ownership record names the node, the node's
member record its admin socket). On the same host, the request goes to that socket, so
``message show``, ``message schedule --wait``, ``shard inspect`` through the engine, mutation
plans and checkpoints work from any node's home. An owner on another host cannot be
reached through a Unix socket: appends then go straight to the shard's Shard Log (any node
may append to the shared Command Topic; the receipt says QUEUED and the owner applies it),
and reads are refused naming the owner, its host and its socket. Aggregates (status,
shards, lanes, every message or attempt) stay this node's own view.
"""

from __future__ import annotations

import socket
from pathlib import Path

from nereus.adapters.admin.admin_client import AdminClient, typed_answer
from nereus.adapters.admin.wire import (
    AppendAnswer,
    AppendRequest,
    AttemptList,
    CheckpointRequest,
    MessageExplanation,
    OpenAttemptView,
    PlanAnswer,
    PlanRequest,
)
from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.offline.checkpoint_take import CheckpointTaken
from nereus.client.receipt import Receipt
from nereus.engine.admin.api import AdminApi
from nereus.engine.hosting.cluster.node_lookup import StoreOwnerLookup
from nereus.engine.process.home_engine import Engine
from nereus.errors import NotFound
from nereus.shard import ShardId, partition_for
from nereus.views import MessageDetail, MessageList


class NodeApi(AdminApi):
    """``AdminApi`` of one node, forwarding what another node owns (module docstring)."""

    def __init__(self, engine: Engine, store: ClusterStore, *, host: str) -> None:
        super().__init__(engine, owners=StoreOwnerLookup(store))
        self.store = store
        self.host = host

    def _remote(self, shard: ShardId, *, timeout: float = 60.0) -> AdminClient | None:
        """The owner's admin client when the shard is owned elsewhere on this host; None
        when this engine owns it, or nobody reachable here does."""
        if shard in self.engine.shards:
            return None
        owned = self.store.owners().get(shard)
        if owned is None:
            return None
        member = self.store.members().get(owned.record.node_id)
        if member is None or member.host not in (self.host, socket.gethostname()):
            return None
        path = Path(member.address)
        return AdminClient(path, timeout=timeout) if path.exists() else None

    def _message_shard(self, delay_message_id: str, route: str) -> ShardId:
        settings = self.engine.config.route(route)
        return ShardId(route, partition_for(delay_message_id, settings.partitions))

    # per-shard reads --------------------------------------------------------------------
    def message(self, delay_message_id: str, *, route: str = "default",
                barrier: bool = False, everywhere: bool = False) -> MessageDetail:
        """The owner of the message's id's shard answers; a message it does not hold on a
        route with an ORDERED lane (placed on its key's shard) is asked of this node's own
        shards and of the other owners this node can reach, each (with ``barrier``)
        behind a barrier on its shards of the route."""
        if everywhere:
            return super().message(delay_message_id, route=route, barrier=barrier,
                                   everywhere=True)
        remote = self._remote(self._message_shard(delay_message_id, route))
        try:
            if remote is None:
                return super().message(delay_message_id, route=route, barrier=barrier)
            return typed_answer(remote.message(delay_message_id, route=route,
                                               barrier=barrier), MessageDetail, "/v1/messages")
        except NotFound:
            if not self.engine.config.ordered_lanes:
                raise
            found = self._message_elsewhere(delay_message_id, route, barrier)
            if found is None:
                raise
            return found

    def _message_elsewhere(self, delay_message_id: str, route: str,
                           barrier: bool) -> MessageDetail | None:
        """The message from this node's shards of ``route`` or a reachable owner of the
        others, each asked (with ``barrier``) behind a barrier on all its shards of it."""
        try:
            return super().message(delay_message_id, route=route, barrier=barrier,
                                   everywhere=True)
        except NotFound:
            pass
        asked: set[str] = set()
        for partition in range(self.engine.config.route(route).partitions):
            remote = self._remote(ShardId(route, partition))
            if remote is None or str(remote.path) in asked:
                continue
            asked.add(str(remote.path))
            try:
                return typed_answer(remote.message(delay_message_id, route=route,
                                                   barrier=barrier, everywhere=True),
                                    MessageDetail, "/v1/messages")
            except NotFound:
                continue
        return None

    def explain(self, delay_message_id: str, *, route: str = "default"
                ) -> MessageExplanation:
        remote = self._remote(self._message_shard(delay_message_id, route))
        if remote is None:
            return super().explain(delay_message_id, route=route)
        return typed_answer(remote.explain(delay_message_id, route=route),
                            MessageExplanation, "/v1/explain")

    def messages(self, *, shard: str | None, state: str | None, lane: str | None,
                 limit: int, after: str | None = None) -> MessageList:
        remote = None if shard is None else self._remote(ShardId.parse(shard))
        if remote is None:
            return super().messages(shard=shard, state=state, lane=lane, limit=limit,
                                    after=after)
        return remote.read("/v1/messages", MessageList, shard=shard, state=state, lane=lane,
                           limit=limit, after=after)

    def attempts(self, *, shard: str | None, state: str | None,
                 limit: int | None = None) -> list[OpenAttemptView]:
        remote = None if shard is None else self._remote(ShardId.parse(shard))
        if remote is None:
            return super().attempts(shard=shard, state=state, limit=limit)
        return remote.read("/v1/attempts", AttemptList, shard=shard, state=state,
                           limit=limit).attempts

    # per-shard writes -------------------------------------------------------------------
    def checkpoint(self, request: CheckpointRequest) -> CheckpointTaken:
        remote = self._remote(ShardId.parse(request.shard), timeout=request.timeout_s + 30)
        if remote is None:
            return super().checkpoint(request)
        return remote.post("/v1/checkpoints", request, CheckpointTaken)

    def plan_mutation(self, request: PlanRequest) -> PlanAnswer:
        remote = self._remote(ShardId.parse(request.shard))
        if remote is None:
            return super().plan_mutation(request)
        return remote.post("/v1/mutations/plan", request, PlanAnswer)

    def submit(self, request: AppendRequest) -> AppendAnswer:
        """Our shards' records appended here; each other owner's on this host asked of it;
        the rest appended straight to their Shard Logs (QUEUED). Receipts in order."""
        receipts: list[Receipt | None] = [None] * len(request.records)
        local: list[int] = []
        remote: dict[Path, tuple[AdminClient, list[int]]] = {}
        direct: dict[ShardId, list[int]] = {}
        timeout = 120 + request.wait_ms / 1000
        for index, item in enumerate(request.records):
            shard = ShardId.parse(item.shard)
            client = self._remote(shard, timeout=timeout)
            if shard in self.engine.shards:
                local.append(index)
            elif client is not None:
                remote.setdefault(client.path, (client, []))[1].append(index)
            else:
                direct.setdefault(shard, []).append(index)
        parts: list[tuple[list[int], AppendAnswer]] = []
        if local:
            parts.append((local, super().submit(self._part(request, local))))
        for client, indexes in remote.values():
            parts.append((indexes, client.post("/v1/commands", self._part(request, indexes),
                                               AppendAnswer, timeout=timeout)))
        for indexes, answer in parts:
            for index, receipt in zip(indexes, answer.receipts, strict=True):
                receipts[index] = receipt
        for shard, indexes in direct.items():
            for index, receipt in zip(indexes, self._append_direct(shard, request, indexes),
                                      strict=True):
                receipts[index] = receipt
        return AppendAnswer(receipts=[r for r in receipts if r is not None])

    @staticmethod
    def _part(request: AppendRequest, indexes: list[int]) -> AppendRequest:
        return AppendRequest(records=[request.records[i] for i in indexes],
                             wait_ms=request.wait_ms)

    def _append_direct(self, shard: ShardId, request: AppendRequest,
                       indexes: list[int]) -> list[Receipt]:
        if shard not in {ShardId(r.name, p) for r in self.engine.config.routes.values()
                         for p in range(r.partitions)}:
            raise NotFound(f"shard {shard} is not a shard of this cluster")
        log = self.engine.open_shard_log(shard)
        try:
            got = log.append([request.records[i].data for i in indexes])
        finally:
            log.close()
        return [request.records[i].queued(receipt.position, receipt.broker_ms)
                for i, receipt in zip(indexes, got, strict=True)]
