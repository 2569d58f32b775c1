"""An UNKNOWN attempt on a real home, made the way production makes one.

A previous owner activated the shard, admitted a publish (PUBLISH_ADMISSION applied, attempt
PUBLISHING) and died before any outcome; the next owner's activation barrier turns the
attempt UNKNOWN and its message UNCERTAIN. The dead owner's records are appended to the
file Shard Log as it would have written them (with the engine stopped): the message's
SCHEDULE (due now), the dead owner's ACTIVATION_BARRIER with the next fencing epoch, and
its admission, decided now (a decision that leads its broker time is refused). Then the
engine is started by the test.
"""

from __future__ import annotations

import time
from pathlib import Path

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.identity import ensure_route_identity
from nereus.client import RouteRef, prepare_schedule
from nereus.config import parse_config
from nereus.machine.tx import work_digest
from nereus.records import ActivationBarrier, PublishAdmission, RouteIdentity, encode
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Activation, decode_value

DEAD_OWNER = "dead-owner"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _live_epoch(home: Path, shard: ShardId) -> int:
    """The fencing epoch of the shard's last applied activation (0 if it never had one)."""
    path = home / "state" / shard.route / str(shard.partition)
    if not (path / "CURRENT").exists():
        return 0
    with ShardStore.open(path, read_only=True) as store:
        raw = store.get(keys.META_ACTIVATION)
    return 0 if raw is None else decode_value(raw, Activation).fencing_epoch


def make_unknown_attempt(home: Path, delay_message_id: str = "uncertain-1",
                         attempt_id: str = "ghost-attempt", partitions: int = 1,
                         lane: str = "local") -> ShardId:
    """Leave ``attempt_id`` PUBLISHING for a new message ``delay_message_id`` on an
    initialised ``home`` whose engine is stopped (and whose log is fully applied); the next
    ``nereus engine start`` recovers the attempt to UNKNOWN. Returns the message's shard."""
    now = _now_ms()
    schedule = prepare_schedule(RouteRef("default", partitions), command_id=f"s-{attempt_id}",
                                delay_message_id=delay_message_id, lane=lane,
                                deliver_at_ms=now, action_at_ms=now, payload=b"x")
    shard = schedule.shard
    epoch = _live_epoch(home, shard) + 1
    barrier = ActivationBarrier(barrier_id=f"b-{attempt_id}", owner_id=DEAD_OWNER,
                                fencing_epoch=epoch)
    admission = PublishAdmission(
        attempt_id=attempt_id, delay_message_id=delay_message_id, generation=1,
        work_digest=work_digest(delay_message_id, 1, now, 0), lane=lane,
        claim_id="dead-claim", claim_sequence=1, owner_id=DEAD_OWNER, fencing_epoch=epoch,
        prepared_digest="x", decided_earliest_ms=now, decided_latest_ms=now + 1,
    )
    config = home / "nereus.toml"
    identity = (parse_config(config.read_text()).route("default").identity(shard.partition)
                if config.exists() else  # a home the test harness configures later (no id)
                RouteIdentity(route_id="", route="default", partition=shard.partition,
                              partitions=partitions))
    log = FileShardLog(home / "shardlog" / shard.route / str(shard.partition))
    try:
        ensure_route_identity(log, identity, where="the test's log")
        log.append([schedule.data, encode(barrier), encode(admission)])
    finally:
        log.close()
    return shard
