"""The front door's answers (``AdminEndpoints``): each question asked of the worker
processes over their own admin sockets.

Per-shard requests go to the shard's owner (ownership record -> member record -> socket);
a shard with no ACTIVE owner is waited for up to ``OWNER_WAIT_S`` (then the error names the
worker that is down), a shard held FAILED is not (its owner answers, or its reason is the
error); a read or append the old owner could no longer serve is asked again of the new one.
Aggregates ask every worker at once and merge (``answer_merge``). On a cluster node, a
shard none of its workers owns is asked of one of them, whose ``NodeApi`` asks the owner on
this host, appends to the Shard Log, or names the owner. Answers decode into the engine's
own typed documents, and a worker's error keeps its kind (404 stays 404).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final, TypeVar
from urllib.parse import quote

import msgspec

from nereus.adapters.admin.admin_client import AdminClient, NotListening
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
)
from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.offline.checkpoint_take import CheckpointTaken
from nereus.adapters.offline.command_lookup import CommandStatus
from nereus.client.receipt import Receipt
from nereus.cluster.records import OwnerState
from nereus.config import Config
from nereus.engine.admin.status_views import health_problems, trusted_time_view
from nereus.engine.hosting.workers.answer_merge import (
    UNOWNED,
    answered,
    listed,
    merge_lanes,
    merge_shards,
    own_workers,
    prefixed,
    shard_key,
)
from nereus.engine.hosting.workers.home import worker_socket
from nereus.engine.process.payload_collector import PayloadCollector
from nereus.engine.runtime.supervisor import Supervisor
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.errors import EngineUnreachable, NereusError, NotFound
from nereus.shard import ShardId, partition_for
from nereus.timespec import format_time_ms
from nereus.views import MessageDetail, MessageList, MessageView, decode_cursor, encode_cursor

T = TypeVar("T")
OWNER_WAIT_S: Final = 15.0  # a session TTL for the owner to go, a few seconds to activate


class FrontApi:
    """The home's engine as one, answered by its worker processes (module docstring)."""

    def __init__(self, home: Path, config: Config, store: ClusterStore, members: list[str],
                 supervisor: Supervisor, *, owner_id: str, started_ms: int,
                 clock: TrustedClock) -> None:
        self.home = home
        self.config = config
        self.store = store
        self.members = members  # the workers' node ids, by index
        self.count = len(members)
        self.clustered = config.cluster is not None
        self.supervisor = supervisor
        self.owner_id = owner_id
        self.started_ms = started_ms
        self.clock = clock
        # the front door's payload collection (a home that is not a cluster's node), set
        # once it runs: its counters join the merged metrics
        self.payloads: PayloadCollector | None = None
        self._pool = ThreadPoolExecutor(max_workers=4 * self.count + 4,
                                        thread_name_prefix="front-door")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # whom to ask ------------------------------------------------------------------------
    def _worker(self, index: int, timeout: float = 30.0) -> AdminClient:
        return AdminClient(worker_socket(self.home, index), timeout=timeout)

    def _owner(self, shard_text: str, timeout: float = 30.0) -> AdminClient:
        """The admin client of the worker that owns the shard (waited for a while)."""
        shard = ShardId.parse(shard_text)
        if shard not in self.configured():
            raise NotFound(f"shard {shard} is not a shard of this engine",
                           hint="`nereus shard list` lists them")
        deadline = time.monotonic() + OWNER_WAIT_S
        while True:
            owned = self.store.owners().get(shard)
            ours = owned is not None and (not self.clustered
                                          or owned.record.node_id in self.members)
            if ours and owned is not None and owned.record.state == OwnerState.FAILED \
                    and owned.record.refused:  # nobody has it open: its owner's reason
                raise ShardFailed(f"shard {shard} is FAILED: {owned.record.detail}",
                                  hint="`nereus engine status` and `nereus engine logs "
                                  "--level error` say more; the shard is tried again now "
                                  "and then")
            # a failed loop's owner still has the shard open: it answers reads, and says
            # why it takes no append, as a single engine does
            if ours and owned is not None and owned.record.state in (OwnerState.ACTIVE,
                                                                     OwnerState.FAILED):
                member = self.store.members().get(owned.record.node_id)
                if member is not None:
                    return AdminClient(Path(member.address), timeout=timeout)
            if self.clustered:  # another node's shard: a worker's NodeApi asks its owner
                return self._any_worker(timeout)
            free = _free_bytes(self.home)
            if time.monotonic() > deadline or (free is not None and free < DISK_FULL_BYTES):
                raise NereusError(f"shard {shard} has no owner now: {self._why_unowned()}",
                                  hint="`nereus engine status` says more; try again shortly")
            time.sleep(0.05)

    def _why_unowned(self, answers: list[EngineStatus | NereusError] | None = None) -> str:
        """Why no worker holds a shard, the real cause first: the home's disk full; a
        worker process that is not running (its own error); a worker's thread that fails
        (its session, its shard loop: the workers' status ``answers``, asked when not
        given); else a move in progress."""
        free = _free_bytes(self.home)
        if free is not None and free < DISK_FULL_BYTES:
            return f"the disk of {self.home} is full ({free:,} bytes free)"
        down = [w for w in self.supervisor.statuses()
                if w.kind == "process" and w.state.value != "RUNNING"]
        if down:
            return "; ".join(f"worker {w.name} is {w.state.value}"
                             + (f": {w.last_error}" if w.last_error else "") for w in down)
        if answers is None:
            answers = self._everyone(lambda c: msgspec.convert(c.get("/v1/status"),
                                                               EngineStatus))
        failing = [f"{self.members[index]}/{w.name} is {w.state}: {w.last_error}"
                   for index, status in enumerate(answers)
                   if isinstance(status, EngineStatus) for w in status.workers
                   if w.state in ("BACKOFF", "FAILED") and w.last_error]
        if failing:
            return "; ".join(failing)
        return "it is moving between worker processes"

    def _read(self, shard_text: str, ask: Callable[[AdminClient], T]) -> T:
        """``ask`` of the shard's owner; again of the next owner if that one went away."""
        deadline = time.monotonic() + OWNER_WAIT_S
        while True:
            try:
                return ask(self._owner(shard_text))
            except EngineUnreachable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _any_worker(self, timeout: float) -> AdminClient:
        """A worker whose admin socket is there (the first one)."""
        for index in range(self.count):
            if worker_socket(self.home, index).exists():
                return self._worker(index, timeout)
        raise EngineUnreachable("no worker process of this node answers now",
                                hint="`nereus engine status` says why; try again shortly")

    def _everyone(self, ask: Callable[[AdminClient], T]) -> list[T | NereusError]:
        """``ask`` of every worker at once; its answer or error, by worker index."""
        def one(index: int) -> T | NereusError:
            try:
                return ask(self._worker(index))
            except NereusError as exc:
                return exc
        return list(self._pool.map(one, range(self.count)))

    def configured(self) -> list[ShardId]:
        return [ShardId(route.name, partition) for route in self.config.routes.values()
                for partition in range(route.partitions)]

    def _expected(self) -> list[ShardId]:
        """The shards status lists even when no worker holds them: every one of a
        standalone home; on a node of a cluster, only those its workers hold."""
        return [] if self.clustered else self.configured()

    # status -----------------------------------------------------------------------------
    def status(self) -> EngineStatus:
        answers = self._everyone(lambda c: msgspec.convert(c.get("/v1/status"), EngineStatus))
        statuses = [a for a in answers if isinstance(a, EngineStatus)]
        shards = merge_shards((s.shards for s in statuses), self._expected())
        workers = own_workers(self.supervisor)
        for index, answer in enumerate(answers):
            if isinstance(answer, EngineStatus):
                workers += prefixed(self.members[index], answer.workers)
        # a worker's clock (they decide), else the front's own; a worker's held back step
        # is its own: the one that has held back furthest is reported
        trusted = max((s.trusted_time for s in statuses), default=None,
                      key=lambda t: t.held_back_ms) or trusted_time_view(self.clock)
        problems = health_problems(shards, workers, trusted)
        # a worker process that is not running is a problem already, with its reason
        running = {w.name for w in workers if w.kind == "process" and w.state == "RUNNING"}
        problems += [f"worker process {index} does not answer: {answer.message}"
                     for index, answer in enumerate(answers)
                     if isinstance(answer, NereusError) and f"process-{index}" in running]
        if any(s.state == UNOWNED for s in shards):  # why nobody holds them, as known
            why = self._why_unowned(answers)
            shards = [msgspec.structs.replace(s, error=f"no worker owns it now: {why}")
                      if s.state == UNOWNED else s for s in shards]
        problems += [f"shard {s.shard} is {UNOWNED}: {s.error}" for s in shards
                     if s.state == UNOWNED]
        return EngineStatus(
            running=True, healthy=not problems, problems=problems, owner_id=self.owner_id,
            home=str(self.home), started_at=format_time_ms(self.started_ms),
            trusted_time=trusted, shards=shards,
            lanes=merge_lanes(s.lanes for s in statuses), workers=workers)

    def shards(self) -> list[ShardView]:
        answers = self._everyone(lambda c: listed(c.get("/v1/shards"), "shards", ShardView))
        return merge_shards(answered(answers), self._expected())

    def lanes(self) -> list[LaneView]:
        return merge_lanes(answered(self._everyone(
            lambda c: listed(c.get("/v1/lanes"), "lanes", LaneView))))

    def metrics(self) -> MetricsExposition:
        """Every worker's exposition merged, each sample once
        (``nereus.engine.metrics.exposition_merge``)."""
        from nereus.engine.metrics.exposition_merge import merged_exposition

        owners = {str(shard): owned.record.node_id
                  for shard, owned in self.store.owners().items()}
        from nereus.engine.metrics.payload_gc_families import payload_gc_families

        own = [] if self.payloads is None else payload_gc_families(self.payloads)
        return merged_exposition(self._everyone(lambda c: c.get("/v1/metrics")), self.members,
                                 own_workers(self.supervisor), owners, own)

    # messages, attempts, commands -------------------------------------------------------
    def attempts(self, *, shard: str | None, state: str | None,
                 limit: int | None = None) -> list[OpenAttemptView]:
        def ask(c: AdminClient) -> list[OpenAttemptView]:
            return listed(c.get("/v1/attempts", shard=shard, state=state, limit=limit),
                           "attempts", OpenAttemptView)
        if shard:
            return self._read(shard, ask)
        return sorted((a for answer in answered(self._everyone(ask)) for a in answer),
                      key=lambda a: shard_key(a.shard))[:limit]

    def messages(self, *, shard: str | None, state: str | None, lane: str | None,
                 limit: int, after: str | None = None) -> MessageList:
        """One page: each shard's owner asked in shard order for the rest of the page,
        from the cursor's shard on, until the page is full or a shard has more."""
        def ask(one: str, rest: int, cursor: str | None) -> Callable[[AdminClient], MessageList]:
            return lambda c: msgspec.convert(c.get(
                "/v1/messages", shard=one, state=state, lane=lane, limit=rest, after=cursor),
                MessageList)
        if shard:
            return self._read(shard, ask(shard, limit, after))
        first = None if after is None else ShardId.parse(decode_cursor(after)[0])
        held = self.configured() if not self.clustered else [  # a node lists its own shards
            s for s, owned in self.store.owners().items() if owned.record.node_id in self.members]
        todo = sorted(s for s in held if first is None or s >= first)
        out: list[MessageView] = []
        for index, one in enumerate(todo):
            page = self._read(str(one), ask(str(one), limit - len(out),
                                            after if one == first else None))
            out += page.messages
            if page.next_cursor is not None:
                return MessageList(messages=out, next_cursor=page.next_cursor)
            if len(out) >= limit:
                later = todo[index + 1:]
                return MessageList(messages=out, next_cursor=encode_cursor(str(later[0]), "")
                                   if later else None)
        return MessageList(messages=out, next_cursor=None)

    def message(self, delay_message_id: str, *, route: str = "default",
                barrier: bool = False, everywhere: bool = False) -> MessageDetail:
        """The owner of the message's id's shard answers; a message it does not hold on a
        route with an ORDERED lane (placed on its key's shard) is asked of every worker,
        each (with ``barrier``) behind a barrier on its own shards of the route."""
        settings = self.config.route(route)
        shard = ShardId(route, partition_for(delay_message_id, settings.partitions))
        try:
            return self._read(str(shard), lambda c: msgspec.convert(
                c.message(delay_message_id, route=route, barrier=barrier), MessageDetail))
        except NotFound:
            if not self.config.ordered_lanes:
                raise
            answers = self._everyone(lambda c: msgspec.convert(c.message(
                delay_message_id, route=route, barrier=barrier, everywhere=True),
                MessageDetail))
            found = next((a for a in answers if isinstance(a, MessageDetail)), None)
            if found is None:
                raise
            return found

    def explain(self, delay_message_id: str, *, route: str = "default"
                ) -> MessageExplanation:
        settings = self.config.route(route)
        shard = ShardId(route, partition_for(delay_message_id, settings.partitions))
        return self._read(str(shard), lambda c: msgspec.convert(
            c.explain(delay_message_id, route=route), MessageExplanation))

    def command(self, command_id: str) -> CommandStatus:
        answers = self._everyone(lambda c: msgspec.convert(
            c.get(f"/v1/commands/{quote(command_id, safe='')}"), CommandStatus))
        found = [a for a in answers if isinstance(a, CommandStatus)]
        for evidence in ("APPLIED", "QUEUED"):
            for status in found:
                if status.evidence == evidence:
                    return status
        failed = [a for a in answers if isinstance(a, NereusError)
                  and not isinstance(a, NotFound)]
        if failed:
            raise failed[0]
        raise NotFound(f"no command {command_id} on any shard of this engine: neither applied "
                       "nor queued", hint="check the id (a receipt's command_id, or an "
                       "operator mutation's idempotency_key)")

    # per-shard writes -------------------------------------------------------------------
    def checkpoint(self, request: CheckpointRequest) -> CheckpointTaken:
        owner = self._owner(request.shard, timeout=request.timeout_s + 30)
        return owner.post("/v1/checkpoints", request, CheckpointTaken)

    def plan_mutation(self, request: PlanRequest) -> PlanAnswer:
        return self._owner(request.shard).post("/v1/mutations/plan", request, PlanAnswer)

    def submit(self, request: AppendRequest) -> AppendAnswer:
        """Each owner appends its shards' records (all owners at once); the receipts in the
        request's order. A worker that does not hold a shard after all (it let the shard go
        between the lookup and the request), or is gone, appended nothing of its part: that
        part goes to the owner found next."""
        timeout = 120 + request.wait_ms / 1000
        receipts: list[Receipt | None] = [None] * len(request.records)
        pending = list(range(len(request.records)))
        deadline = time.monotonic() + OWNER_WAIT_S
        while pending:
            groups: dict[Path, list[int]] = {}
            clients: dict[Path, AdminClient] = {}
            for index in pending:
                client = self._owner(request.records[index].shard, timeout=timeout)
                clients[client.path] = client
                groups.setdefault(client.path, []).append(index)
            parts = [(clients[path], AppendRequest(
                records=[request.records[i] for i in groups[path]], wait_ms=request.wait_ms))
                for path in groups]
            pending = []
            answers = self._pool.map(lambda part: _append(*part, timeout=timeout), parts)
            for path, answer in zip(groups, answers, strict=True):
                if isinstance(answer, NereusError):
                    if time.monotonic() > deadline:
                        raise answer
                    pending += groups[path]
                    continue
                for index, receipt in zip(groups[path], answer.receipts, strict=True):
                    receipts[index] = receipt
            if pending:
                time.sleep(0.05)
        return AppendAnswer(receipts=[r for r in receipts if r is not None])

DISK_FULL_BYTES: Final = 1 << 20  # a home with less free is full: nothing can be written


def _free_bytes(home: Path) -> int | None:
    import shutil

    try:
        return shutil.disk_usage(home).free
    except OSError:
        return None


class ShardFailed(NereusError):
    """The shard's owner holds it FAILED (``nereus.engine.hosting.cluster.cluster_node``)."""


def _append(client: AdminClient, part: AppendRequest, *,
            timeout: float) -> AppendAnswer | NereusError:
    """``part`` appended by ``client``'s worker; the error when the worker appended none
    of it for want of the shard (``NotFound``) or was not there (``NotListening``)."""
    try:
        return client.post("/v1/commands", part, AppendAnswer, timeout=timeout)
    except (NotFound, NotListening) as exc:
        return exc
