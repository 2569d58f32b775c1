"""What the admin socket answers: read models over the engine's live shards, command
submission (append + optional wait for the applied result), and status snapshots.

Reads of RocksDB here run on admin threads beside the shard loops; RocksDB reads are
thread-safe and never block the loops' writes.
"""

from __future__ import annotations

import itertools
from typing import Protocol

import msgspec

from nereus.adapters.admin.wire import (
    AppendAnswer,
    AppendRequest,
    CheckpointRequest,
    EngineStatus,
    LaneView,
    MessageExplanation,
    MetricsExposition,
    OpenAttemptView,
    PlanAnswer,
    PlanRequest,
    ShardView,
    WorkerView,
)
from nereus.adapters.offline.checkpoint_take import CheckpointTaken, taken_view
from nereus.adapters.offline.command_lookup import CommandStatus
from nereus.engine.admin.command_appends import append
from nereus.engine.admin.status_views import (
    StatusReads,
    health_problems,
    lane_views,
    shard_views,
    trusted_time_view,
    worker_views,
)
from nereus.engine.process.home_engine import Engine
from nereus.engine.shard.owner_loop import ShardLoop
from nereus.errors import NotFound, ShardNotHere, UsageError
from nereus.records import QueryBarrier, decode, encode
from nereus.records.codec import DecodeFailure
from nereus.shard import ShardId, partition_for
from nereus.state.values import Message
from nereus.timespec import format_time_ms
from nereus.views import (
    MESSAGE_PAGE_SKIPS,
    MessageDetail,
    MessageList,
    MessageView,
    attempt_view,
    decode_cursor,
    encode_cursor,
    find_message,
    message_detail,
    message_not_found,
    message_page,
    open_attempts,
)


class OwnerLookup(Protocol):
    """Who owns a shard this engine does not (a cluster node's coordinator)."""

    def owner_of(self, shard: ShardId) -> str | None:
        """The owner in words (node, host, admin address), or None if nobody does."""
        ...


class AdminApi:
    """The engine as the admin socket's handlers see it: one method per endpoint."""

    def __init__(self, engine: Engine, *, owners: OwnerLookup | None = None) -> None:
        self.engine = engine
        self.owners = owners

    def _not_owned(self, shard: ShardId, what: str) -> ShardNotHere:
        """A shard this engine does not own: who does, when a cluster knows. Never a
        NotFound: whether the target exists is not known here (found by the chaos runs: a
        barrier query between owners answered "no such message")."""
        where = None if self.owners is None else self.owners.owner_of(shard)
        if where is None:
            return ShardNotHere(f"{what} is not owned by this engine, and no owner answers "
                                "for it right now (it may be moving between nodes)",
                                hint="try again in a few seconds; `nereus cluster status` "
                                "names its owner")
        return ShardNotHere(f"{what} is not owned by this engine: {where} owns it",
                            hint="ask that node (`nereus --home ITS_HOME ...` on its host)")

    # helpers --------------------------------------------------------------------------
    def _loop(self, shard_text: str) -> ShardLoop:
        shard = ShardId.parse(shard_text)
        loop = self.engine.shards.get(shard)
        if loop is None:
            raise self._not_owned(shard, f"shard {shard}")
        return loop

    def explain(self, delay_message_id: str, *, route: str = "default"
                ) -> MessageExplanation:
        return self._loop_for_message(delay_message_id, route).explain(delay_message_id)

    def _loop_for_message(self, delay_message_id: str, route: str) -> ShardLoop:
        """The loop of the shard that holds the message: its id's shard, unless an ORDERED
        lane placed it by key elsewhere (every shard of the route is then searched)."""
        settings = self.engine.config.route(route)
        shard = ShardId(route, partition_for(delay_message_id, settings.partitions))
        home = self.engine.shards.get(shard)
        if home is None:
            raise self._not_owned(shard, f"shard {shard} (message {delay_message_id})")
        if find_message(home.store, delay_message_id) is not None:
            return home
        for other, loop in sorted(self.engine.shards.items()):
            if other.route == route and other != shard and \
                    find_message(loop.store, delay_message_id) is not None:
                return loop
        return home

    # status ---------------------------------------------------------------------------
    def status(self) -> EngineStatus:
        assert self.engine.clock is not None
        trusted = trusted_time_view(self.engine.clock)
        reads = StatusReads(self.engine)  # each lane value and due range read once
        shards = shard_views(self.engine, reads)
        workers = self.workers()
        problems = health_problems(shards, workers, trusted)
        return EngineStatus(
            running=True, healthy=not problems, problems=problems,
            owner_id=self.engine.owner_id, home=str(self.engine.home),
            started_at=format_time_ms(self.engine.started_ms), trusted_time=trusted,
            shards=shards, lanes=lane_views(self.engine, reads), workers=workers)

    def workers(self) -> list[WorkerView]:
        """Every supervised worker thread: its state, restarts and last error."""
        return worker_views(self.engine)

    def shards(self) -> list[ShardView]:
        return shard_views(self.engine)

    def lanes(self) -> list[LaneView]:
        """Every configured lane, then every lane that has messages but no configuration."""
        return lane_views(self.engine)

    def metrics(self) -> MetricsExposition:
        """This process's Prometheus exposition (``nereus.engine.metrics``)."""
        from nereus.engine.metrics.collect import exposition
        from nereus.engine.metrics.listener import CONTENT_TYPE

        return MetricsExposition(content_type=CONTENT_TYPE, exposition=exposition(self.engine))

    # messages and attempts ------------------------------------------------------------
    def message(self, delay_message_id: str, *, route: str = "default",
                barrier: bool = False, everywhere: bool = False) -> MessageDetail:
        """The message as its shard holds it. With ``barrier``, after every record queued
        before the request is applied on the shard that holds it: its id's shard, and,
        when the message is not there and the route has an ORDERED lane (which places a
        keyed message on its key's shard), every other shard of the route this engine
        owns (``everywhere``: those alone, as a front door or node asks its peers)."""
        if everywhere:
            return self._message_anywhere(delay_message_id, route, barrier)
        loop = self._loop_for_message(delay_message_id, route)
        barrier_position = self._barrier([loop])[loop.shard] if barrier else None
        message = find_message(loop.store, delay_message_id)
        if message is None and barrier and self.engine.config.ordered_lanes:
            try:
                return self._message_anywhere(delay_message_id, route, barrier,
                                              skip=loop.shard)
            except NotFound:
                pass  # the id's shard's answer says more
        return self._message_detail(loop, delay_message_id, message, barrier_position)

    def _message_anywhere(self, delay_message_id: str, route: str, barrier: bool, *,
                          skip: ShardId | None = None) -> MessageDetail:
        """The message on whichever shard of ``route`` this engine owns holds it (all of
        them behind a query barrier when asked)."""
        loops = [loop for shard, loop in sorted(self.engine.shards.items())
                 if shard.route == route and shard != skip]
        positions = self._barrier(loops) if barrier else None
        for loop in loops:
            message = find_message(loop.store, delay_message_id)
            if message is not None:
                position = None if positions is None else positions[loop.shard]
                return self._message_detail(loop, delay_message_id, message, position)
        raise NotFound(f"no message {delay_message_id} on the shards of route {route} this "
                       "engine owns" + (" (all of them behind a query barrier)"
                                        if barrier and loops else ""),
                       hint="check the id and the route (`--route`)")

    def _barrier(self, loops: list[ShardLoop]) -> dict[ShardId, int]:
        """A QUERY_BARRIER appended to each shard, then waited for: every record queued
        before it is applied. Each barrier's position, by shard."""
        receipts = {}
        for loop in loops:
            data = encode(QueryBarrier(command_id=f"barrier-{self.engine.new_id()}"))
            (receipts[loop.shard],) = loop.log.append([data])
            loop.wake()
        for loop in loops:
            position = receipts[loop.shard].position
            if not loop.wait_applied(position, 30):
                raise UsageError(f"the query barrier at {position} of shard {loop.shard} was "
                                 "not applied in 30 s")
        return {shard: receipt.position for shard, receipt in receipts.items()}

    def _message_detail(self, loop: ShardLoop, delay_message_id: str, message: Message | None,
                        barrier_position: int | None) -> MessageDetail:
        end = self.engine.log_heads.read([(loop.shard, loop.log)])[loop.shard].end
        applied = loop.applied_position
        if message is None:
            raise message_not_found(delay_message_id, str(loop.shard), applied, end)
        return message_detail(loop.store, message, str(loop.shard), applied_position=applied,
                              log_end_position=end, barrier_position=barrier_position)

    def messages(self, *, shard: str | None, state: str | None, lane: str | None,
                 limit: int, after: str | None = None) -> MessageList:
        """One page: this engine's shards (or ``shard``) in order, from the cursor ``after``
        on; each shard examines at most ``limit + MESSAGE_PAGE_SKIPS`` keys, all shards of
        one page together no more than that either."""
        loops = [(ShardId.parse(shard), self._loop(shard))] if shard else sorted(
            self.engine.shards.items())
        begin, begin_after = (None, "") if after is None else decode_cursor(after)
        first = None if begin is None else ShardId.parse(begin)
        if shard and first is not None and first != loops[0][0]:
            raise UsageError(f"--after names a page of shard {first}, not of {shard}")
        budget = limit + MESSAGE_PAGE_SKIPS
        out: list[MessageView] = []
        todo = [(s, loop) for s, loop in loops if first is None or s >= first]
        for index, (s, loop) in enumerate(todo):
            page = message_page(loop.store, str(s), state=state, lane=lane,
                                limit=limit - len(out), budget=budget,
                                after=(begin_after or None) if s == first else None)
            out += page.messages
            budget -= page.examined
            if page.resume_after is not None:
                return MessageList(messages=out, next_cursor=encode_cursor(str(s),
                                                                           page.resume_after))
            if len(out) >= limit or budget <= 0:
                later = todo[index + 1:]
                return MessageList(messages=out, next_cursor=encode_cursor(str(later[0][0]), "")
                                   if later else None)
        return MessageList(messages=out, next_cursor=None)

    def attempts(self, *, shard: str | None, state: str | None,
                 limit: int | None = None) -> list[OpenAttemptView]:
        """The open attempts, shard by shard; at most ``limit`` (the dashboard's bound:
        the scan stops there, however many UNCERTAIN messages a shard holds)."""
        wanted = {"publishing": "PUBLISHING", "unknown": "UNKNOWN"}.get(
            (state or "").lower(), state)
        loops = [self._loop(shard)] if shard else [
            loop for _, loop in sorted(self.engine.shards.items())]
        recovery = self.engine.evidence
        found = ((loop, attempt) for loop in loops
                 for attempt in open_attempts(loop.store, state=wanted))
        return [OpenAttemptView(**msgspec.structs.asdict(attempt_view(attempt)),
                                shard=str(loop.shard),
                                evidence_search=None if recovery is None
                                else recovery.search_view(attempt.attempt_id))
                for loop, attempt in itertools.islice(found, limit)]

    def command(self, command_id: str) -> CommandStatus:
        """Where a command stands: APPLIED with its result on some shard, QUEUED in a
        shard's log past the applied position, or NotFound."""
        from nereus.adapters.offline.command_lookup import (
            applied_result,
            command_view,
            queued_position,
        )

        loops = sorted(self.engine.shards.items())
        for shard, loop in loops:
            result = applied_result(loop.store, command_id)
            if result is not None:
                return command_view(command_id, str(shard), result, None)
        for shard, loop in loops:
            applied = loop.applied_position
            queued = queued_position(loop.log, 0 if applied is None else applied + 1,
                                     command_id)
            if queued is not None:
                return command_view(command_id, str(shard), None, queued)
        raise NotFound(f"no command {command_id} on any shard of this engine: neither applied "
                       "nor queued", hint="check the id (a receipt's command_id, or an "
                       "operator mutation's idempotency_key)")

    # checkpoints ----------------------------------------------------------------------
    def checkpoint(self, request: CheckpointRequest) -> CheckpointTaken:
        """Take a checkpoint of one shard now; answers once it is catalogued."""
        loop = self._loop(request.shard)
        taken = loop.request_checkpoint().result(timeout=request.timeout_s)
        objects = self.engine.checkpointer.objects if self.engine.checkpointer else None
        assert objects is not None
        return taken_view(taken, objects)

    # operator mutations ---------------------------------------------------------------
    def plan_mutation(self, request: PlanRequest) -> PlanAnswer:
        """Plan one operator mutation against the live shard: precondition, dry run, impact.

        Writes nothing; the CLI appends the planned record through ``submit`` afterwards.
        """
        from nereus.operator import plan_mutation
        from nereus.operator.plan import plan_document
        from nereus.records.codec import OPERATOR_MUTATIONS

        loop = self._loop(request.shard)
        record = decode(request.data)
        if not isinstance(record, OPERATOR_MUTATIONS):
            what = record.detail if isinstance(record, DecodeFailure) else type(record).__name__
            raise UsageError(f"data is not an operator mutation: {what}")
        assert self.engine.clock is not None
        plan = plan_mutation(loop.store, record, shard=str(loop.shard),
                             broker_ms=self.engine.clock.now().latest_ms,
                             before=request.before)
        return PlanAnswer(shard=str(loop.shard), **msgspec.structs.asdict(plan_document(plan)))

    # commands -------------------------------------------------------------------------
    def submit(self, request: AppendRequest) -> AppendAnswer:
        """Append records (grouped per shard) and optionally wait for their results."""
        assert self.engine.clock is not None
        return append(request, self._loop, self.engine.clock.source.monotonic)
