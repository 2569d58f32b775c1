"""An UNKNOWN attempt on a real home, made the way production makes one.

A previous owner admitted a publish (PUBLISH_ADMISSION applied, attempt PUBLISHING) and
died before any outcome; the next owner's activation barrier turns the attempt UNKNOWN
and its message UNCERTAIN. The admission is appended to the file Shard Log as the dead
owner would have (with the message's real work digest), then the engine is started.
"""

from __future__ import annotations

import time
from pathlib import Path

from nereus.engine.shardlog.file import FileShardLog
from nereus.records import PublishAdmission, encode
from nereus.shard import ShardId, partition_for
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Activation, decode_value
from nereus.views import find_message
from tests.conftest import run_nereus
from tests.daemon import start_engine, stop_engine, wait_for


def make_unknown_attempt(home: Path, delay_message_id: str = "uncertain-1",
                         attempt_id: str = "ghost-attempt", partitions: int = 1,
                         lane: str = "local") -> ShardId:
    """Leave ``attempt_id`` UNKNOWN for ``delay_message_id`` on an initialised ``home``.

    The engine is stopped on return; the next ``nereus engine start`` recovers the
    attempt to UNKNOWN. Returns the message's shard.
    """
    shard = ShardId("default", partition_for(delay_message_id, partitions))
    # due within the 30 s the state machine allows between a decision and its broker
    # time, yet far enough out that the short first engine run does not publish it
    scheduled = run_nereus("message", "schedule", "--lane", lane, "--delay", "25s", "--id",
                           delay_message_id, "--payload", "x", home=home)
    assert scheduled.code == 0, scheduled.stderr
    start_engine(home)
    try:
        wait_for(lambda: run_nereus("--json", "message", "show", delay_message_id,
                                    home=home).json().get("state") == "SCHEDULED",
                 timeout=20, what=f"{delay_message_id} to be applied")
    finally:
        stop_engine(home)
    with ShardStore.open(home / "state" / shard.route / str(shard.partition),
                         read_only=True) as store:
        data = dead_owners_admission(store, delay_message_id, attempt_id)
    log = FileShardLog(home / "shardlog" / shard.route / str(shard.partition))
    try:
        log.append([data])
    finally:
        log.close()
    return shard


def dead_owners_admission(store: ShardStore, delay_message_id: str,
                          attempt_id: str = "ghost-attempt") -> bytes:
    """The PUBLISH_ADMISSION the shard's last live owner (the engine that just stopped)
    would have appended for the message's current work, had it died right after."""
    message = find_message(store, delay_message_id)
    raw_active = store.get(keys.META_ACTIVATION)
    assert message is not None and message.work_digest is not None
    assert raw_active is not None, "no owner ever activated this shard"
    active = decode_value(raw_active, Activation)
    return encode(PublishAdmission(
        attempt_id=attempt_id, delay_message_id=delay_message_id,
        generation=message.generation, work_digest=message.work_digest, lane=message.lane,
        claim_id="dead-claim", claim_sequence=1, owner_id=active.owner_id,
        fencing_epoch=active.fencing_epoch, prepared_digest="x",
        decided_earliest_ms=message.action_at_ms,
        decided_latest_ms=max(message.action_at_ms, int(time.time() * 1000)) + 1,
    ))
