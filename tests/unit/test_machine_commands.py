"""SCHEDULE, CANCEL, RESCHEDULE, dedup and bad bytes in the shard state machine."""

from __future__ import annotations

import hashlib

from nereus import records as r
from nereus.machine import Limits, Reason
from nereus.machine.tx import work_digest
from nereus.records import MessageState, ResultStatus, encode
from nereus.records.codec import HEADER
from nereus.state import keys
from nereus.state.values import Identity, Message, PayloadStage, Result, WorkRef, decode_value
from nereus.testing import MemoryShard
from tests.unit.builders import admission, cancel, reschedule, schedule


def test_schedule_creates_generation_one_on_the_timeline() -> None:
    """SCHEDULE makes a SCHEDULED message, generation 1, with a timeline entry at actionAt."""
    shard = MemoryShard()
    result = shard.result(schedule("m1", 5_000, key="k", headers={"h": "v"}, payload=b"hi",
                                   expire_at_ms=9_000))
    assert result.status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None
    assert (message.state, message.generation, message.deliver_at_ms) == (
        MessageState.SCHEDULED, 1, 5_000)
    assert (message.key, message.headers, message.payload, message.expire_at_ms) == (
        "k", {"h": "v"}, b"hi", 9_000)
    assert shard.keys_with_prefix(keys.TIMELINE) == [keys.timeline_key("local", 5_000, "m1")]


def test_schedule_fills_every_field_of_message_workref_and_result() -> None:
    """SCHEDULE builds Message, WorkRef and Result positionally; each field lands by name.

    The values differ wherever SCHEDULE lets them (created and updated position are both
    the record's, retries and attempts both 0), so a swap in a positional call fails here.
    """
    shard = MemoryShard()
    shard.apply(schedule("m0", cmd="c0"))
    shard.apply(schedule("m00", cmd="c00"))  # positions 0 and 1: the next record is at 2
    record = schedule("m1", 5_000, cmd="c1", action_at_ms=6_000, expire_at_ms=9_000, key="k",
                      headers={"h": "v"}, payload=b"hi")
    data = encode(record)
    result = shard.result(data, broker_ms=77)
    digest = work_digest("m1", 1, 6_000, 0)
    assert result == Result(
        status=ResultStatus.APPLIED, kind="SCHEDULE", position=2,
        record_sha256=hashlib.sha256(data).hexdigest(), reason=None, detail=None,
        delay_message_id="m1", generation=1, attempt_id=None,
    )
    assert shard.message("m1") == Message(
        delay_message_id="m1", lane="local", state=MessageState.SCHEDULED, generation=1,
        deliver_at_ms=5_000, action_at_ms=6_000, expire_at_ms=9_000, key="k",
        headers={"h": "v"}, payload=b"hi", payload_ref=None, work_digest=digest, retries=0,
        attempts=0, open_attempt_id=None, schedule_command_id="c1", created_position=2,
        updated_position=2,
    )
    timeline = shard.data[keys.timeline_key("local", 6_000, "m1")]
    assert decode_value(timeline, WorkRef) == WorkRef(
        generation=1, work_kind="PUBLISH", work_digest=digest, retry=0
    )


def test_schedule_over_the_inline_limit_is_rejected_clearly() -> None:
    """An inline payload above the configured limit is REJECTED with the sizes in the detail."""
    shard = MemoryShard(Limits(max_inline_payload_bytes=10))
    result = shard.result(schedule("m1", payload=b"x" * 11))
    assert (result.status, result.reason) == (ResultStatus.REJECTED, Reason.PAYLOAD_TOO_LARGE)
    assert result.detail is not None and "11 bytes" in result.detail and "10" in result.detail
    assert shard.message("m1") is None


def test_schedule_of_an_existing_id_is_rejected() -> None:
    """A second SCHEDULE for the same delayMessageId (another command) is MESSAGE_EXISTS."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    result = shard.result(schedule("m1", cmd="other"))
    assert (result.status, result.reason) == (ResultStatus.REJECTED, Reason.MESSAGE_EXISTS)


def test_invalid_fields_are_rejected_with_the_field() -> None:
    """Bad lane names, expiry before delivery and empty ids are REJECTED, not applied."""
    shard = MemoryShard()
    bad = [schedule("m1", lane="no spaces"), schedule("m2", 10, expire_at_ms=5),
           schedule("", cmd="x")]
    for record in bad:
        result = shard.result(record)
        assert (result.status, result.reason) == (ResultStatus.REJECTED, Reason.INVALID_FIELD)
    assert shard.keys_with_prefix(keys.MSG) == []


def test_cancel_before_admission_wins() -> None:
    """CANCEL of a SCHEDULED message removes its timeline entry and makes it CANCELLED."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    assert shard.result(cancel("m1")).status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.CANCELLED
    assert shard.keys_with_prefix(keys.TIMELINE) == []


def test_cancel_after_admission_is_rejected_and_says_why() -> None:
    """CANCEL after a winning admission is REJECTED ALREADY_ADMITTED naming the attempt."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    shard.apply(admission(shard, "m1", "a1"), broker_ms=1_000)
    result = shard.result(cancel("m1"))
    assert (result.status, result.reason) == (ResultStatus.REJECTED, Reason.ALREADY_ADMITTED)
    assert result.detail is not None and "a1" in result.detail and "admitted" in result.detail
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.PUBLISHING


def test_cancel_of_unknown_and_terminal_messages() -> None:
    """CANCEL of a missing message is MESSAGE_NOT_FOUND; of a cancelled one MESSAGE_TERMINAL."""
    shard = MemoryShard()
    assert shard.result(cancel("nope")).reason == Reason.MESSAGE_NOT_FOUND
    shard.apply(schedule("m1"))
    shard.apply(cancel("m1"))
    assert shard.result(cancel("m1", cmd="again")).reason == Reason.MESSAGE_TERMINAL


def test_reschedule_bumps_generation_and_moves_the_timeline_entry() -> None:
    """RESCHEDULE moves the timeline key to the new actionAt and bumps the generation."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000))
    result = shard.result(reschedule("m1", 7_000))
    assert (result.status, result.generation) == (ResultStatus.APPLIED, 2)
    message = shard.message("m1")
    assert message is not None and (message.generation, message.deliver_at_ms) == (2, 7_000)
    assert shard.keys_with_prefix(keys.TIMELINE) == [keys.timeline_key("local", 7_000, "m1")]


def test_reschedule_after_admission_is_rejected() -> None:
    """RESCHEDULE has the same admission boundary as CANCEL."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    shard.apply(admission(shard, "m1", "a1"), broker_ms=1_000)
    assert shard.result(reschedule("m1", 9_000)).reason == Reason.ALREADY_ADMITTED


def test_same_command_same_bytes_returns_the_first_result() -> None:
    """Re-delivering identical bytes returns the first result and changes nothing."""
    shard = MemoryShard()
    first = shard.apply(schedule("m1"))
    before = dict(shard.data)
    again = shard.apply(schedule("m1"))
    assert again.duplicate and again.result == first.result
    changed = {k for k in set(before) | set(shard.data) if before.get(k) != shard.data.get(k)}
    assert changed == {keys.META_APPLIED, keys.META_RECORDS}


def test_same_command_different_bytes_is_a_conflict() -> None:
    """The same commandId with different bytes is REJECTED DUPLICATE_CONFLICT, kept by position."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000, cmd="c1"))
    result = shard.result(schedule("m2", 2_000, cmd="c1"))
    assert (result.status, result.reason) == (ResultStatus.REJECTED, Reason.DUPLICATE_CONFLICT)
    assert shard.message("m2") is None
    assert shard.get(keys.reject_key(1)) is not None


def test_bad_bytes_leave_a_rejected_result_and_the_shard_moves_on() -> None:
    """Undecodable bytes become REJECTED at their position; later records still apply."""
    shard = MemoryShard()
    result = shard.result(HEADER + b"\xc1garbage")
    assert result.status == ResultStatus.REJECTED and result.reason == "MALFORMED"
    assert result.at_byte is not None
    assert shard.get(keys.reject_key(0)) is not None
    assert shard.result(schedule("m1")).status == ResultStatus.APPLIED


def test_query_barrier_is_applied() -> None:
    """QUERY_BARRIER leaves an APPLIED result saying every earlier record has an answer."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    result = shard.result(r.QueryBarrier(command_id="q1"))
    assert result.status == ResultStatus.APPLIED and result.position == 1


def test_payload_reserve_then_commit_then_schedule_by_reference() -> None:
    """A committed payload can be referenced by SCHEDULE; an uncommitted one cannot."""
    shard = MemoryShard()
    sha = "a" * 64
    shard.apply(r.PayloadReserve(command_id="p1", payload_id="big", size_bytes=100, sha256=sha,
                                 expires_at_ms=10_000))
    early = shard.result(schedule("m0", payload_ref="big"))
    assert early.reason == Reason.UNKNOWN_PAYLOAD
    mismatch = shard.result(r.PayloadCommit(command_id="p2", payload_id="big", size_bytes=99,
                                            sha256=sha, object_key="o/big"))
    assert mismatch.reason == Reason.PAYLOAD_MISMATCH
    ok = shard.result(r.PayloadCommit(command_id="p3", payload_id="big", size_bytes=100,
                                      sha256=sha, object_key="o/big"), broker_ms=5)
    assert ok.status == ResultStatus.APPLIED
    assert shard.result(schedule("m1", payload_ref="big")).status == ResultStatus.APPLIED


def test_a_commit_names_an_object_under_its_own_shards_prefix() -> None:
    """On shard default/0, PAYLOAD_COMMIT of an object under another shard's prefix, or of
    the bare prefix, is REJECTED INVALID_FIELD naming the prefix, and the stage stays
    RESERVED; the same commit under ``payloads/default/0/`` is applied. A node collects its
    shards' payloads by their prefixes: a foreign reference would be lost there."""
    shard = MemoryShard(identity=Identity(route="default", partition=0,
                                          schema_version=keys.SCHEMA_VERSION))
    sha = "a" * 64
    shard.apply(r.PayloadReserve(command_id="p1", payload_id="big", size_bytes=100, sha256=sha,
                                 expires_at_ms=10_000))

    def commit(n: int, object_key: str) -> Result:
        return shard.result(r.PayloadCommit(command_id=f"c{n}", payload_id="big",
                                            size_bytes=100, sha256=sha,
                                            object_key=object_key), broker_ms=5)

    for n, foreign in enumerate(("payloads/default/1/big", "payloads/default/0/",
                                 "payloads/default/00/big", "elsewhere/big")):
        result = commit(n, foreign)
        assert (result.status, result.reason) == (ResultStatus.REJECTED, Reason.INVALID_FIELD)
        assert "'payloads/default/0/'" in (result.detail or "")
    stage = shard.get(keys.payload_key("big"))
    assert stage is not None and decode_value(stage, PayloadStage).state == "RESERVED"
    assert commit(9, "payloads/default/0/big").status == ResultStatus.APPLIED


def test_lane_counters_follow_message_states() -> None:
    """Per-lane counts by state follow every transition (inspect relies on them)."""
    shard = MemoryShard()
    for mid in ("a", "b", "c"):
        shard.apply(schedule(mid))
    shard.apply(cancel("b"))
    lane = shard.lane("local")
    assert lane is not None and lane.counts == {"SCHEDULED": 2, "CANCELLED": 1}
