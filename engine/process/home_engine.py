"""The Engine: owns every shard of a home (store, log, loop), the lane publishers and the
Trusted UTC clock; starts them in order and stops them so that no producer call is
silently dropped.

Every worker (a loop per shard, a publisher per lane, the evidence scanner, the
checkpointer, the payload collector; the daemon adds the admin accept loop) runs under the
engine's ``Supervisor``; ``workers()`` is what ``engine status`` shows. Stop: shards stop
claiming, appended admissions are applied, publishers finish the call in progress (up to
the stop timeout); requests never sent are declined (NOT_PUBLISHED LANE_UNAVAILABLE), a
call still running at the deadline is UNKNOWN, and every outcome goes through the Shard
Log before the loop exits. One ``Clock`` (``time_source``) is read by every worker.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from nereus.adapters.backends.destination.factory import open_destination
from nereus.adapters.backends.destination.protocol import Destination, PublishResult
from nereus.adapters.backends.objectstore.factory import open_object_store
from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.identity import ensure_route_identity
from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.adapters.cluster.catalog_store import CoordinatedCatalog
from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import ClusterHandle
from nereus.adapters.cluster.feature_levels import read_level
from nereus.adapters.home.feature_level import home_level
from nereus.adapters.home.route_secrets import evidence_keys
from nereus.adapters.offline.continuity_checks import DivergedLog, check_shard, guard_file_log
from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.config import Config
from nereus.engine.process.engine_settings import EngineSettings
from nereus.engine.process.evidence_scan import EvidenceRecovery
from nereus.engine.process.lane_changes import LaneChanges, lane_changes
from nereus.engine.process.log_heads import LogHeads
from nereus.engine.process.payload_collector import PayloadCollector
from nereus.engine.process.restore_catch_up import open_shard_state
from nereus.engine.publishing.lane_publisher import (
    LanePublisher,
)
from nereus.engine.runtime.event_log import EventLog, null_event_log
from nereus.engine.runtime.ids import IdSource
from nereus.engine.runtime.supervisor import Supervisor, WorkerStatus
from nereus.engine.runtime.trusted_clock import ChronyHealth, TrustedClock
from nereus.engine.scheduler.permits import Permits
from nereus.engine.shard.checkpointer import Checkpointer
from nereus.engine.shard.evidence_ring import EvidenceRing
from nereus.engine.shard.lane_policy import LanePolicies
from nereus.engine.shard.loop_parts import EngineParts, OwnerParts, ShardParts
from nereus.engine.shard.loop_status import RefusedShard, ShardState
from nereus.engine.shard.owner_loop import ShardLoop
from nereus.engine.shard.ownership import LeaseGate
from nereus.layout import HomeLayout
from nereus.records import Disposition, Outcome, RouteIdentity
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.memory import StoreMemory
from nereus.state.store import ShardStore
from nereus.state.values import decode_value


@dataclass
class Engine:
    home: Path
    config: Config
    settings: EngineSettings = field(default_factory=EngineSettings)
    clock: TrustedClock | None = None  # Trusted UTC; built on ``time_source`` when None
    time_source: Clock | None = None  # the raw Clock (the clock's own source when None)
    destinations: dict[str, Destination] | None = None  # tests may inject adapters
    new_id: Callable[[], str] = field(default_factory=IdSource)
    log_event: EventLog = null_event_log
    shards: dict[ShardId, ShardLoop] = field(default_factory=dict)
    publishers: dict[str, LanePublisher] = field(default_factory=dict)
    started_ms: int = 0
    checkpointer: Checkpointer | None = None
    evidence: EvidenceRecovery | None = None
    payloads: PayloadCollector | None = None  # the engine's own payload gc (when it runs)
    catalog: ClusterHandle | None = None  # a cluster's coordinator: the checkpoint catalog
    # shards granted to this node whose opening raised (``activate_shard``): why
    refused: dict[ShardId, RefusedShard] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.layout = HomeLayout(self.home)
        self.chrony: ChronyHealth | None = None
        if self.clock is None:
            source = self.time_source or SYSTEM_CLOCK
            self.chrony = ChronyHealth(clock=source) if self.settings.chrony else None
            self.clock = TrustedClock(max_error_ms=self.settings.max_clock_error_ms,
                                      health=self.chrony, source=source)
        elif self.time_source is not None and self.time_source is not self.clock.source:
            raise ValueError("the Trusted UTC clock must read the engine's time_source")
        self.time_source = self.clock.source
        self.owner_id = f"{socket.gethostname()}:{os.getpid()}:{self.new_id()[:8]}"
        # each configured lane keeps a reserved share of the worker and byte pools
        self.permits = Permits(self.settings.permits, lanes=self.config.lanes)
        # each shard log's end as reports read it, never blocked by an unreachable log
        self.log_heads = LogHeads(monotonic=self.time_source.monotonic)
        self.supervisor = Supervisor(self.log_event, clock=self.time_source)
        self.memory = None if self.settings.memory_mb is None else StoreMemory.of(
            self.settings.memory_mb,
            shards=self.settings.memory_shards or len(self.configured_shards()))
        self.evidence_rings: dict[str, EvidenceRing] = {}  # per route, read at first open

    def evidence_ring(self, route: str) -> EvidenceRing:
        """The route's evidence keys as every shard of it here uses them (a rotation
        replaces them: ``EvidenceRing``)."""
        ring = self.evidence_rings.get(route)
        if ring is None:
            ring = self.evidence_rings[route] = EvidenceRing(evidence_keys(self.home, route))
        return ring

    def workers(self) -> list[WorkerStatus]:
        """Every supervised worker: state, restarts, last error."""
        return self.supervisor.statuses()

    def _destination(self, name: str) -> Destination:
        if self.destinations is not None and name in self.destinations:
            return self.destinations[name]
        return open_destination(self.config.lanes[name], self.home)

    def _publisher(self, name: str) -> LanePublisher:
        """The lane's publisher, not started. Building its destination does no I/O (each
        adapter connects in its probe or publish), and nothing here probes it: the first
        probe is the publisher thread's, under its deadline, so a destination that hangs
        when opened leaves its lane NOT READY and never holds up the engine's start."""
        assert self.time_source is not None
        return LanePublisher(name, self._destination(name), clock=self.time_source,
                             events=self.log_event,
                             publish_timeout_s=self.settings.publish_timeout_s,
                             probe_timeout_s=self.settings.probe_timeout_s)

    def configured_shards(self) -> list[ShardId]:
        """Every shard of every configured route."""
        return [ShardId(route.name, partition) for route in self.config.routes.values()
                for partition in range(route.partitions)]

    def start(self, *, timeout_s: float = 60.0,
              owned: Iterable[ShardId] | None = None) -> None:
        """Start the workers and the shards this engine owns: every configured shard, or
        ``owned`` (a cluster node starts with none and activates what it is granted)."""
        assert self.clock is not None
        clock = self.clock
        source = clock.source
        self.started_ms = source.wall_ms()
        for name in self.config.lanes:
            self.publishers[name] = self._publisher(name)
        self.objects = open_object_store(self.config.objects, self.home)
        if self.catalog is not None:
            self.objects = CoordinatedCatalog(self.objects, self.catalog)
        self.checkpointer = Checkpointer(self.objects, self.config.checkpoints,
                                         events=self.log_event, monotonic=source.monotonic)
        for shard in self.configured_shards() if owned is None else owned:
            self.shards[shard] = self._open_loop(shard)
        self.checkpointer.start(self.supervisor)
        if self.chrony is not None:
            self.supervisor.spawn("chrony", "clock", self.chrony.run)
        self.evidence = EvidenceRecovery(
            self.shards, {name: p.evidence for name, p in self.publishers.items()},
            clock=source, interval_s=self.settings.evidence_interval_s, events=self.log_event)
        for publisher in self.publishers.values():
            publisher.start(self.supervisor)
        # a FAILED shard (its log diverged) never runs; the others do, and status says why
        running = {shard: loop for shard, loop in self.shards.items()
                   if loop.state != ShardState.FAILED}
        for loop in running.values():
            loop.start(self.supervisor)
        for shard, loop in running.items():
            if not loop.wait_active(timeout_s):
                raise RuntimeError(f"shard {shard} did not become active: "
                                   f"{loop.error or loop.state}")
        self.evidence.start(self.supervisor)
        # the whole home where it sees every shard; a cluster node its own shards (the
        # front door of a home's --workers collects for its workers)
        if self.catalog is not None or owned is None:
            self.payloads = PayloadCollector(
                self.config, self.layout, self.objects, clock=source,
                owned=self.active_shards if self.catalog is not None else None,
                interval_s=self.settings.payload_gc_interval_s, events=self.log_event)
            self.payloads.start(self.supervisor)
        self.log_event("engine_started", owner_id=self.owner_id, shards=len(self.shards),
                       lanes=sorted(self.publishers))

    def _open_loop(self, shard: ShardId, *, lease: LeaseGate | None = None,
                   granted_epoch: int | None = None) -> ShardLoop:
        """The shard's loop over its database and Shard Log (not started). A log that lost
        applied records leaves the loop FAILED, saying why. Whatever it opened is closed
        again when it raises (a node tries the shard again later, in this process)."""
        log = self.open_shard_log(shard)
        store: ShardStore | None = None
        try:
            store = self.open_shard_state(shard, log)
            return self._loop_over(shard, log, store, lease=lease, granted_epoch=granted_epoch)
        except BaseException:
            if store is not None:
                store.close()
            log.close()
            raise

    def _loop_over(self, shard: ShardId, log: ShardLog, store: ShardStore, *,
                   lease: LeaseGate | None, granted_epoch: int | None) -> ShardLoop:
        assert self.clock is not None and self.checkpointer is not None
        route = self.config.route(shard.route)
        partition = shard.partition
        # before anything is appended (the route identity of an empty log, the
        # activation barrier): a log that lost applied records takes nothing more
        diverged = check_shard(shard, store, log, self.layout.shard_state(shard))
        if diverged is not None:
            self.log_event("shard_diverged", level="error", shard=str(shard),
                           error=diverged.message, hint=diverged.hint,
                           applied_position=diverged.applied_position,
                           log_end=diverged.log_end)
            log = DivergedLog(log, diverged)
        else:
            if isinstance(log, FileShardLog):
                # the live applied position: a log cut under a running engine is refused
                guard_file_log(shard, log, store.applied_position,
                               self.layout.shard_state(shard))
            applied = store.get(keys.META_ROUTE)
            ensure_route_identity(
                log, route.identity(partition), source=self.config.source,
                where=getattr(log, "description", f"the Shard Log of {shard}"),
                applied=None if applied is None else decode_value(applied, RouteIdentity))
        loop = ShardLoop(
            ShardParts(shard=shard, store=store, log=log,
                       lanes=LanePolicies.of(self.config, route=shard.route),
                       evidence_keys=self.evidence_ring(route.name),
                       staging=self.layout.root / "staging" / shard.route / str(partition)),
            EngineParts(clock=self.clock, publishers=self.publishers, permits=self.permits,
                        settings=replace(self.settings.loop, feature_level=self.feature_level()),
                        events=self.log_event,
                        checkpointer=self.checkpointer, fetch_payload=self.objects.get_bytes),
            OwnerParts(owner_id=self.owner_id, new_id=self.new_id, lease=lease,
                       granted_epoch=granted_epoch))
        if diverged is not None:
            loop.fail(diverged)
        return loop

    def feature_level(self) -> int:
        """The feature level in force, read as a loop is built (a raised level takes
        effect at a shard's next activation): a cluster's from its coordinator, else the
        home's (``docs/formats.md``)."""
        if self.config.cluster is not None and self.catalog is not None:
            return read_level(ClusterStore(self.catalog)).level.level
        return home_level(self.home).level

    def active_shards(self) -> list[ShardId]:
        """The shards whose loop is ACTIVE here now (a node's own, for its payload gc)."""
        return sorted(shard for shard, loop in list(self.shards.items())
                      if loop.state == ShardState.ACTIVE)

    def activate_shard(self, shard: ShardId, *, epoch: int, lease: LeaseGate,
                       timeout_s: float = 120.0) -> ShardLoop:
        """Open, recover and activate a shard this node was granted at ``epoch`` (a cluster
        node's; its producer calls need ``lease``). Returns the loop, ACTIVE or not (its
        ``state`` and ``error`` say why not). When opening it raises, ``refused`` keeps why
        (``engine status`` shows the shard FAILED with it) until it is released."""
        try:
            loop = self._open_loop(shard, lease=lease, granted_epoch=epoch)
        except Exception as exc:
            self.refused[shard] = RefusedShard.of(exc, epoch=epoch)
            raise
        self.refused.pop(shard, None)
        self.shards[shard] = loop
        if loop.state != ShardState.FAILED:
            try:
                loop.start(self.supervisor)
            except BaseException:  # not running: the node finds it gone and lets it go
                self.shards.pop(shard, None)
                self.log_heads.forget(shard)
                loop.log.close()
                loop.store.close()
                raise
            loop.wait_active(timeout_s)
        return loop

    def release_shard(self, shard: ShardId, *, checkpoint: bool,
                      timeout_s: float = 60.0) -> str | None:
        """Let a shard go: no new claims; wait for every admission to be acted on and every
        outcome to be in the log; take a checkpoint (a planned move's new owner restores
        it, unless its own warmed state is newer); end the loop and close the shard.
        Returns the id of the checkpoint taken, if one was.

        The checkpoint is awaited until its snapshot is taken, not until it is uploaded:
        the checkpointer hashes, uploads and catalogues the snapshot (a directory of hard
        links of its own) afterwards, and closes the shard's log after its CHECKPOINT_MARK.

        Nothing is left PUBLISHING when the outcomes arrive in time, so the next owner's
        recovery turns nothing UNKNOWN. A call still running at the deadline is left to the
        next owner (its recovery marks it UNKNOWN)."""
        self.refused.pop(shard, None)
        loop = self.shards.get(shard)
        if loop is None:
            return None
        time = self.time_source
        assert time is not None
        deadline = time.monotonic() + timeout_s
        loop.begin_stop()
        loop.wait_settled(deadline)
        taken: str | None = None
        if checkpoint and loop.state == ShardState.STOPPING and self.checkpointer is not None:
            try:
                taken = loop.request_snapshot().result(
                    timeout=max(deadline - time.monotonic(), 1.0))
            except Exception as exc:  # the move goes on: the next owner replays the log
                self.log_event("release_checkpoint_failed", level="warning", shard=str(shard),
                               error=f"{type(exc).__name__}: {exc}")
        loop.finish(deadline + 5)
        self.shards.pop(shard, None)
        self.log_heads.forget(shard)
        if taken is not None and self.checkpointer is not None:
            self.checkpointer.close_when_done(loop.log)  # its CHECKPOINT_MARK goes there
        else:
            loop.log.close()
        loop.store.close()
        for publisher in self.publishers.values():  # the next owner may take its fences
            publisher.fences.release(str(shard))
        self.log_event("shard_released", shard=str(shard), checkpoint_id=taken,
                       state=str(loop.state))
        return taken

    def reconfigure(self, config: Config) -> LaneChanges:
        """Take a new configuration's lane changes while running (``lane_changes``): new
        lanes get a publisher, changed leads and orderings reach every shard loop. Routes
        must be the same."""
        if config.routes != self.config.routes:
            raise ValueError("routes cannot change while the engine runs")
        changes = lane_changes(self.config, config)
        self.config = config
        self.permits.configure(config.lanes)
        for name in changes.added:
            publisher = self.publishers[name] = self._publisher(name)
            publisher.start(self.supervisor)
        if self.evidence is not None:
            self.evidence.destinations = {n: p.evidence for n, p in self.publishers.items()}
        limits = {name: self.publishers[name].destination.max_record_bytes
                  for name in changes.added}
        for loop in list(self.shards.values()):
            loop.reconfigure_lanes(LanePolicies.of(config, route=loop.shard.route), limits)
        return changes

    def open_shard_log(self, shard: ShardId) -> ShardLog:
        """A new handle on the shard's Shard Log (the caller closes it)."""
        assert self.clock is not None
        return open_shard_log(self.config.route(shard.route), shard, self.home,
                              clock_ms=self.clock.source.wall_ms)

    def open_shard_state(self, shard: ShardId, log: ShardLog) -> ShardStore:
        """The shard's database; restored from the Recovery Set when missing, damaged or
        far behind it (``restore_catch_up.open_shard_state``; ``StoreInUse`` while another
        process holds it)."""
        return open_shard_state(self, shard, log)

    def stop(self) -> dict[str, int]:
        """Stop every worker by one deadline (``stop_timeout_s`` on the engine's Clock)."""
        clock = self.time_source
        assert clock is not None
        deadline = clock.monotonic() + self.settings.stop_timeout_s
        if self.evidence is not None:
            self.evidence.stop()
        if self.payloads is not None:
            self.payloads.stop()
        if self.chrony is not None:
            self.chrony.close()
        for loop in self.shards.values():
            loop.begin_stop()
        for loop in self.shards.values():
            loop.wait_drained(deadline)
        declined = unknown = 0
        for publisher in self.publishers.values():
            for request, reply in publisher.stop(max(deadline - clock.monotonic(), 0.1)):
                reply(PublishResult(request.attempt_id, Outcome.NOT_PUBLISHED,
                                    Disposition.LANE_UNAVAILABLE,
                                    "engine stopping: the request never reached the destination"))
                declined += 1
            for request, reply in publisher.stuck():
                reply(PublishResult(request.attempt_id, Outcome.UNKNOWN, Disposition.NONE,
                                    "engine stopped while the destination call was in progress"))
                unknown += 1
        for loop in self.shards.values():
            loop.finish(deadline + 5)
        if self.checkpointer is not None:
            self.checkpointer.stop(max(deadline + 30 - clock.monotonic(), 1.0))
        for loop in self.shards.values():
            loop.log.close()
            loop.store.close()
        for publisher in self.publishers.values():
            publisher.destination.close()
        self.log_event("engine_stopped", declined=declined, unknown=unknown)
        return {"declined": declined, "unknown": unknown}
