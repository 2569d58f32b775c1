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

from typing import TYPE_CHECKING

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.adapters.offline.checkpoint_catalog import recovery_floor
from nereus.adapters.offline.checkpoint_restore import restore_into
from nereus.engine.runtime.event_log import EventLog, safe_event
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
