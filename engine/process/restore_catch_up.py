"""A shard's local state far behind its Recovery Set: restore the newest checkpoint over it.

A node that held a shard long ago keeps its old copy of the state. Replaying the log from
that copy's applied position is right but slow when the log has moved on by millions of
records since; the newest catalogued checkpoint may be far ahead of it. ``catch_up``
restores that checkpoint over the copy when it is more than ``[checkpoints]
every_records`` ahead (at least ``MIN_BEHIND`` records: below that, replaying is cheaper
than a download), and never one that applied records the log no longer holds (it would
diverge). A checkpoint that fails its checks is skipped for the next older one. Used by an
activation (``Engine.open_shard_state``) and by a planned move's warm-up.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.adapters.offline.checkpoint_catalog import recovery_floor
from nereus.adapters.offline.checkpoint_restore import restore_into
from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.errors import StoreError, StoreInUse
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity

if TYPE_CHECKING:
    from nereus.engine.process.home_engine import Engine

MIN_BEHIND = 10_000  # records: below this, replaying is cheaper than a download


def catch_up(engine: Engine, shard: ShardId, store: ShardStore, log: ShardLog, *,
             events: EventLog, why: str) -> ShardStore:
    """``store``, or (closed and replaced) the newest checkpoint restored over it when it
    is far behind (module docstring); ``why`` goes into the ``state_restored`` event."""
    settings = engine.config.checkpoints
    members = recovery_floor(engine.objects, shard, settings.keep).members
    local = store.applied_position()
    local_at = -1 if local is None else local
    behind = max(settings.every_records, MIN_BEHIND)
    log_end = log.end_position()
    for entry in reversed(members):
        ahead = entry.applied_position
        if ahead is None or ahead - local_at <= behind:
            return store
        if ahead >= log_end:
            continue  # the log lost records it applied: restoring it would diverge
        path = store.path
        store.close()
        report = restore_into(engine.objects, entry, path, replace=True)
        identity = Identity(route=shard.route, partition=shard.partition,
                            schema_version=keys.SCHEMA_VERSION)
        store = ShardStore.open(path, identity=identity, memory=engine.memory)
        if report.ok:
            safe_event(events, "state_restored", shard=str(shard),
                       checkpoint_id=entry.checkpoint_id, applied_position=ahead,
                       replaced_applied_position=local, reason=why)
            return store
        safe_event(events, "checkpoint_unusable", shard=str(shard),
                   checkpoint_id=entry.checkpoint_id,
                   problems=[f"{c.name}: {c.detail}" for c in report.checks if not c.ok])
    return store


def open_shard_state(engine: Engine, shard: ShardId, log: ShardLog) -> ShardStore:
    """The shard's database; restored from the Recovery Set when missing, damaged or far
    behind it (``catch_up``); ``StoreInUse`` while another process holds it."""
    path = engine.layout.shard_state(shard)
    identity = Identity(route=shard.route, partition=shard.partition,
                        schema_version=keys.SCHEMA_VERSION)
    if (path / "CURRENT").exists():
        try:
            return catch_up(engine, shard, ShardStore.open(path, identity=identity,
                                                         memory=engine.memory),
                            log, events=engine.log_event, why="far behind the Recovery Set")
        except StoreInUse:
            raise  # held by another process: in use, not damaged; never moved aside
        except StoreError as exc:
            assert engine.time_source is not None
            aside = path.with_name(f"{path.name}.damaged-{engine.time_source.wall_ms()}")
            path.rename(aside)
            engine.log_event("state_damaged", shard=str(shard), error=exc.message,
                           moved_to=str(aside))
    elif path.exists():
        shutil.rmtree(path)
    members = recovery_floor(engine.objects, shard, engine.config.checkpoints.keep).members
    log_end = log.end_position()
    for entry in reversed(members):
        if entry.applied_position is not None and entry.applied_position >= log_end:
            # the log lost records this checkpoint applied: restoring it would diverge
            engine.log_event("checkpoint_ahead_of_log", level="warning", shard=str(shard),
                           checkpoint_id=entry.checkpoint_id, log_end=log_end,
                           applied_position=entry.applied_position)
            continue
        report = restore_into(engine.objects, entry, path)
        if report.ok:
            engine.log_event("state_restored", shard=str(shard),
                           checkpoint_id=entry.checkpoint_id,
                           applied_position=entry.applied_position)
            return ShardStore.open(path, identity=identity, memory=engine.memory)
        failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok]
        engine.log_event("checkpoint_unusable", shard=str(shard),
                       checkpoint_id=entry.checkpoint_id, problems=failed)
    start = log.start_position() if isinstance(log, FileShardLog) else 0
    if start > 0:
        raise StoreError(
            f"shard {shard} has no database, no usable checkpoint, and its log starts at "
            f"position {start}: the state cannot be rebuilt",
            hint="restore a checkpoint with `nereus checkpoint restore ID --into DIR`",
        )
    return ShardStore.open(path, identity=identity, create=True, memory=engine.memory)
