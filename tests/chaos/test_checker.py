"""The checker can fail: for each invariant, a hand-made history holding one violation of it
is named by that invariant (with the ids and the lines that prove it), and a clean history
passes every invariant. A checker that never fires proves nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.chaos.checker import INVARIANTS, Facts, Violation, check
from tests.chaos.history import (
    EngineStart,
    LogEntry,
    Op,
    QueryAnswer,
    Receipt,
    Seen,
    lines_of,
    parse_lines,
)
from tests.chaos.story import SHARD, T0, Story


def named(story: Story, invariant: str) -> list[Violation]:
    """The violations of ``invariant``; and no other invariant fires on the story."""
    violations = check(story.lines())
    others = [v.render() for v in violations if v.invariant != invariant]
    assert others == [], others
    return [v for v in violations if v.invariant == invariant]


def clean_story() -> Story:
    """Two plain messages published on time, one cancelled, two of one key of the ORDERED
    lane in order, a retry answered with the first result, and matching digests."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.schedule("m2", T0 + 2_000, invoke_ms=T0 + 10)
    story.schedule("c1", T0 + 3_000)
    story.cancel("c1", at_ms=T0 + 100)
    story.schedule("k1", T0 + 1_500, lane="ordered", key="a")
    story.schedule("k2", T0 + 1_600, lane="ordered", key="a")
    story.publish("m1", "att-m1", at_ms=T0 + 1_020)
    story.publish("k1", "att-k1", at_ms=T0 + 1_520)
    story.publish("k2", "att-k2", at_ms=T0 + 1_620)
    story.publish("m2", "att-m2", at_ms=T0 + 2_030)
    story.digest("live", "d1")
    story.digest("replay:empty", "d1")
    story.digest("replay:checkpoint:cp-1", "d1")
    return story


def test_a_clean_history_passes_every_invariant() -> None:
    """Published on time, in order, once each, consistent, replayed alike: no violation."""
    assert check(clean_story().lines()) == []


def test_the_history_round_trips_through_json_lines() -> None:
    """Every entry kind is written and read back as the same frozen Struct, so a failed run's
    file is re-checked offline with the same verdict."""
    lines = clean_story().lines()
    again = list(parse_lines(line.text for line in lines))
    assert [line.entry for line in again] == [line.entry for line in lines]


# -- no acknowledged command lost -------------------------------------------------------------
def test_a_queued_command_missing_from_the_log_is_named() -> None:
    """A QUEUED receipt at a position the Shard Log does not hold is a lost command."""
    story = clean_story()
    story.entries.append(Op(index=99, kind="cancel", invoke_ms=T0, complete_ms=T0 + 1, ok=True,
                            message_id="m9", receipts=[Receipt(
                                evidence="QUEUED", shard=SHARD, source_position=77,
                                command_id="cancel-m9", kind="CANCEL")]))
    (violation,) = named(story, "acknowledged_commands_applied")
    assert "cancel-m9" in violation.ids and "position 77" in violation.text
    assert "holds nothing there" in violation.text


def test_a_command_applied_at_a_later_duplicate_is_named() -> None:
    """A retried command whose result names its second position was applied out of source
    order (or twice): the result must name its first position in the log."""
    story = Story()
    first = story.schedule("m1", T0 + 1_000)
    story.publish("m1", "att-1", at_ms=T0 + 1_020)
    again = story._append(SHARD, "SCHEDULE", T0 + 50, dedup_key=first.dedup_key,
                          command_id=first.command_id, delay_message_id="m1",
                          deliver_at_ms=T0 + 1_000)
    key = (SHARD, first.dedup_key or "")
    story.results[key] = msgspec.structs.replace(story.results[key], position=again.position)
    violations = named(story, "acknowledged_commands_applied")
    assert any("not at its first position in the log (1)" in v.text for v in violations)
    assert all(v.quotes for v in violations)


def test_an_applied_receipt_that_disagrees_with_the_shard_is_named() -> None:
    """The client was told APPLIED, the shard's result says REJECTED."""
    story = Story()
    record = story.schedule("m1", T0 + 1_000, evidence="APPLIED")
    story.publish("m1", "att-1", at_ms=T0 + 1_020)
    key = (SHARD, record.dedup_key or "")
    story.results[key] = msgspec.structs.replace(story.results[key], status="REJECTED")
    (violation,) = named(story, "acknowledged_commands_applied")
    assert "told APPLIED" in violation.text and "REJECTED" in violation.text


def test_a_retry_with_other_bytes_is_named() -> None:
    """A retry of a command must append its exact bytes (same command id, same bytes)."""
    story = Story()
    first = story.schedule("m1", T0 + 1_000)
    story.publish("m1", "att-1", at_ms=T0 + 1_020)
    again = story._append(SHARD, "SCHEDULE", T0 + 50, dedup_key=first.dedup_key,
                          command_id=first.command_id, delay_message_id="m1",
                          deliver_at_ms=T0 + 2_000)
    story.entries.append(Op(index=9, kind="retry", invoke_ms=T0 + 40, complete_ms=T0 + 60,
                            ok=True, message_id="m1", retry_of=0, receipts=[Receipt(
                                evidence="QUEUED", shard=SHARD,
                                source_position=again.position,
                                command_id=first.command_id or "", kind="SCHEDULE")]))
    (violation,) = named(story, "acknowledged_commands_applied")
    assert "other bytes" in violation.text


# -- never early -----------------------------------------------------------------------------
def test_a_record_read_before_its_deliver_at_is_early() -> None:
    """A consumer read m1 30 ms before its deliverAt: never_early names it, by how much."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.publish("m1", "att-1", at_ms=T0 + 960, received_ms=T0 + 970)
    (violation,) = named(story, "never_early")
    assert violation.ids == ["m1", "att-1"] and "30 ms before its deliverAt" in violation.text


def test_early_is_judged_by_the_published_generations_deliver_at() -> None:
    """Rescheduled later, then published at the first generation's time: early. Within the
    run's documented clock bound it is not."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.reschedule("m1", T0 + 5_000, at_ms=T0 + 100)
    story.publish("m1", "att-1", at_ms=T0 + 1_020)
    (violation,) = named(story, "never_early")
    assert "generation 2" in violation.text
    story.clock_bound_ms = 4_000
    assert named(story, "never_early") == []


# -- a cancel applied before admission means never published ---------------------------------
def test_a_cancelled_message_read_by_a_consumer_is_named() -> None:
    """The CANCEL won (APPLIED), yet the consumer read an attempt of the message."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.admit("m1", "att-1", at_ms=T0 + 1_010)
    story.settle("m1", "att-1", "NOT_PUBLISHED", at_ms=T0 + 1_020, disposition="RETRIABLE")
    story.cancel("m1", at_ms=T0 + 1_030)
    story.see("m1", "att-1", received_ms=T0 + 1_015)
    violations = check(story.lines())
    cancel = [v for v in violations if v.invariant == "cancel_before_admission"]
    assert cancel and "was cancelled" in cancel[0].text and "cancel-m1" in cancel[0].ids


def test_an_admission_after_a_winning_cancel_is_named() -> None:
    """An attempt admitted after the cancel won is named even if nothing was read."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.cancel("m1", at_ms=T0 + 10)
    story.admit("m1", "att-1", at_ms=T0 + 1_010)
    story.settle("m1", "att-1", "NOT_PUBLISHED", at_ms=T0 + 1_020, disposition="RETRIABLE",
                 message_state="CANCELLED")
    (violation,) = named(story, "cancel_before_admission")
    assert "after its cancel won" in violation.text


# -- at most one publish per attempt ---------------------------------------------------------
def test_an_attempt_read_twice_is_named() -> None:
    """One attempt, two records at the destination."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.publish("m1", "att-1", at_ms=T0 + 1_020)
    story.see("m1", "att-1", received_ms=T0 + 1_100)
    (violation,) = named(story, "one_publish_per_attempt")
    assert "reached the destination 2 times" in violation.text


def test_a_record_no_shard_admitted_is_named() -> None:
    """A record whose attempt id no shard knows: a Producer call without PUBLISHING."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.publish("m1", "att-1", at_ms=T0 + 1_020)
    story.messages["m1"].attempts["ghost"] = story.messages["m1"].attempts["att-1"]
    story.see("m1", "ghost", received_ms=T0 + 1_100)
    del story.messages["m1"].attempts["ghost"]
    violations = check(story.lines())
    mine = [v for v in violations if v.invariant == "one_publish_per_attempt"]
    assert any("which no shard admitted" in v.text and "ghost" in v.ids for v in mine)


def test_a_second_attempt_after_a_proven_publish_is_named() -> None:
    """Attempt 1 was PUBLISHED and settled; attempt 2 was admitted after and read too."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.publish("m1", "att-1", at_ms=T0 + 1_020)
    story.publish("m1", "att-2", at_ms=T0 + 1_200)
    violations = named(story, "one_publish_per_attempt")
    assert any("was proven PUBLISHED" in v.text and "att-2" in v.ids for v in violations)


def test_a_second_attempt_after_unknown_is_allowed() -> None:
    """Attempt 1 UNKNOWN (recorded in the log), attempt 2 admitted after: both may land."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.admit("m1", "att-1", at_ms=T0 + 1_020)
    story.settle("m1", "att-1", "UNKNOWN", at_ms=T0 + 1_030)
    story.see("m1", "att-1", received_ms=T0 + 1_040, durable=False)
    story.publish("m1", "att-2", at_ms=T0 + 1_200)
    assert named(story, "one_publish_per_attempt") == []


# -- ordered lanes ---------------------------------------------------------------------------
def test_one_keys_messages_out_of_deliver_at_order_are_named() -> None:
    """k1 due before k2, both pending when k2 was admitted; the destination has k2 first."""
    story = Story()
    story.schedule("k1", T0 + 1_000, lane="ordered", key="a")
    story.schedule("k2", T0 + 1_100, lane="ordered", key="a")
    story.admit("k1", "att-k1", at_ms=T0 + 1_010)
    story.settle("k1", "att-k1", "NOT_PUBLISHED", at_ms=T0 + 1_020, disposition="RETRIABLE")
    story.publish("k2", "att-k2", at_ms=T0 + 1_110)
    story.publish("k1", "att-k1b", at_ms=T0 + 2_100)
    (violation,) = named(story, "ordered_lanes")
    assert violation.ids == ["k1", "k2"] and "key 'a'" in violation.text
    assert len(violation.lines) >= 4


def test_equal_deliver_at_is_ordered_by_source_position() -> None:
    """Same deliverAt: the one scheduled first must arrive first."""
    story = Story()
    story.schedule("k1", T0 + 1_000, lane="ordered", key="a")
    story.schedule("k2", T0 + 1_000, lane="ordered", key="a")
    story.publish("k2", "att-k2", at_ms=T0 + 1_010)
    story.publish("k1", "att-k1", at_ms=T0 + 1_020)
    (violation,) = named(story, "ordered_lanes")
    assert violation.ids == ["k1", "k2"]


def test_a_message_scheduled_after_the_admission_may_overtake() -> None:
    """k1 (earlier deliverAt) was scheduled only after k2 was admitted: no order between them
    is promised; other keys and unordered lanes are never judged."""
    story = Story()
    story.schedule("k2", T0 + 1_100, lane="ordered", key="a")
    story.admit("k2", "att-k2", at_ms=T0 + 1_110)
    story.schedule("k1", T0 + 1_000, lane="ordered", key="a", invoke_ms=T0 + 1_111)
    story.settle("k2", "att-k2", "PUBLISHED", at_ms=T0 + 1_112)
    story.see("k2", "att-k2", received_ms=T0 + 1_115)
    story.publish("k1", "att-k1", at_ms=T0 + 1_200)
    story.schedule("x1", T0 + 1_000, lane="ordered", key="b")
    story.schedule("u1", T0 + 1_000)
    story.schedule("u2", T0 + 900)
    story.publish("u1", "att-u1", at_ms=T0 + 1_010)
    story.publish("u2", "att-u2", at_ms=T0 + 1_020)
    story.publish("x1", "att-x1", at_ms=T0 + 1_300)
    assert check(story.lines()) == []


def test_admitting_past_an_open_head_is_named() -> None:
    """k1's attempt is still open (UNCERTAIN) and never read; k2 of the same key, later in
    deliverAt order, was admitted after it and published."""
    story = Story()
    story.schedule("k1", T0 + 1_000, lane="ordered", key="a")
    story.schedule("k2", T0 + 1_100, lane="ordered", key="a")
    story.admit("k1", "att-k1", at_ms=T0 + 1_010)
    story.settle("k1", "att-k1", "UNKNOWN", at_ms=T0 + 1_020)
    story.publish("k2", "att-k2", at_ms=T0 + 1_110)
    (violation,) = named(story, "ordered_lanes")
    assert "still had attempt att-k1 open" in violation.text


# -- destination consistency -----------------------------------------------------------------
def test_published_but_never_read_is_named() -> None:
    """PUBLISHED with evidence, yet no consumer read the attempt."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.admit("m1", "att-1", at_ms=T0 + 1_010)
    story.settle("m1", "att-1", "PUBLISHED", at_ms=T0 + 1_020)
    (violation,) = named(story, "destination_consistency")
    assert "PUBLISHED" in violation.text and "no consumer read it" in violation.text


def test_a_not_published_attempt_that_was_read_is_named() -> None:
    """A lost response turned into NOT_PUBLISHED although the record landed; the message
    then ended FAILED though the destination has it."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.admit("m1", "att-1", at_ms=T0 + 1_010)
    story.settle("m1", "att-1", "NOT_PUBLISHED", at_ms=T0 + 1_020, disposition="RETRIABLE",
                 message_state="FAILED")
    story.see("m1", "att-1", received_ms=T0 + 1_015)
    violations = named(story, "destination_consistency")
    texts = " | ".join(v.text for v in violations)
    assert "classified as absent" in texts and "ends FAILED" in texts


def test_uncertain_with_the_record_in_the_destination_is_named() -> None:
    """After quiescence an UNKNOWN attempt whose record the evidence scan could read."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    story.admit("m1", "att-1", at_ms=T0 + 1_010)
    story.settle("m1", "att-1", "UNKNOWN", at_ms=T0 + 1_020)
    story.see("m1", "att-1", received_ms=T0 + 1_015)
    (violation,) = named(story, "destination_consistency")
    assert "still UNKNOWN after quiescence" in violation.text
    story.quiesced = False
    assert named(story, "destination_consistency") == []


# -- an on-time admission never ends EXPIRED --------------------------------------------------
def test_an_expired_message_whose_admission_was_declined_is_named() -> None:
    """Admitted on time, declined (NOT_PUBLISHED LANE_UNAVAILABLE), then EXPIRED."""
    story = Story()
    story.schedule("m1", T0 + 1_000, expire_at_ms=T0 + 1_500)
    story.admit("m1", "att-1", at_ms=T0 + 1_010)
    story.settle("m1", "att-1", "NOT_PUBLISHED", at_ms=T0 + 1_020,
                 disposition="LANE_UNAVAILABLE", message_state="EXPIRED")
    (violation,) = named(story, "admission_not_expired")
    assert violation.ids == ["m1", "att-1"] and "LANE_UNAVAILABLE" in violation.text


def test_an_expired_message_after_a_retriable_refusal_is_allowed() -> None:
    """Refused by the destination (RETRIABLE), then expired: expireAt closed the retry."""
    story = Story()
    story.schedule("m1", T0 + 1_000, expire_at_ms=T0 + 1_500)
    story.admit("m1", "att-1", at_ms=T0 + 1_010)
    story.settle("m1", "att-1", "NOT_PUBLISHED", at_ms=T0 + 1_020, disposition="RETRIABLE",
                 message_state="EXPIRED")
    assert check(story.lines()) == []


# -- queries with the barrier --------------------------------------------------------------
def test_a_barrier_query_that_misses_an_acknowledged_schedule_is_named() -> None:
    """The SCHEDULE was acknowledged before the query began; the query with the barrier
    answered that no such message exists. A query begun before the acknowledgement, or one
    without the barrier, is not judged."""
    story = Story()
    story.schedule("m1", T0 + 60_000, invoke_ms=T0)
    story.entries.append(Op(index=50, kind="query_barrier", invoke_ms=T0 + 100,
                            complete_ms=T0 + 120, ok=True, message_id="m1",
                            answer=QueryAnswer(state=None)))
    story.entries.append(Op(index=51, kind="query_barrier", invoke_ms=T0 + 2,
                            complete_ms=T0 + 20, ok=True, message_id="m1",
                            answer=QueryAnswer(state=None)))
    story.entries.append(Op(index=52, kind="query", invoke_ms=T0 + 100, complete_ms=T0 + 120,
                            ok=True, message_id="m1", answer=QueryAnswer(state=None)))
    story.publish("m1", "att-1", at_ms=T0 + 60_010)
    (violation,) = named(story, "barrier_reads_acknowledged_writes")
    assert "no such message" in violation.text and violation.ids == ["m1"]


def test_the_clients_event_order_decides_within_one_millisecond() -> None:
    """Write acknowledged and query begun in the same millisecond: the client's event
    counter says which came first."""
    story = Story()
    story.schedule("m1", T0 + 60_000, invoke_ms=T0)
    schedule_op = next(e for e in story.entries if isinstance(e, Op))
    story.entries[story.entries.index(schedule_op)] = msgspec.structs.replace(
        schedule_op, complete_ms=T0 + 5, invoke_seq=1, complete_seq=2)
    story.entries.append(Op(index=50, kind="query_barrier", invoke_ms=T0 + 5,
                            complete_ms=T0 + 9, ok=True, message_id="m1", invoke_seq=3,
                            complete_seq=4, answer=QueryAnswer(state=None)))
    story.publish("m1", "att-1", at_ms=T0 + 60_010)
    (violation,) = named(story, "barrier_reads_acknowledged_writes")
    assert violation.ids == ["m1"]


def test_a_barrier_query_behind_an_acknowledged_reschedule_is_named() -> None:
    """Rescheduled (generation 2, acknowledged), then a barrier query answers generation 1."""
    story = Story()
    story.schedule("m1", T0 + 60_000)
    story.reschedule("m1", T0 + 70_000, at_ms=T0 + 10)
    story.entries.append(Op(index=50, kind="query_barrier", invoke_ms=T0 + 100,
                            complete_ms=T0 + 120, ok=True, message_id="m1",
                            answer=QueryAnswer(state="SCHEDULED", generation=1)))
    story.publish("m1", "att-1", at_ms=T0 + 70_010)
    (violation,) = named(story, "barrier_reads_acknowledged_writes")
    assert "answered generation 1" in violation.text


# -- operator mutations ----------------------------------------------------------------------
def test_an_operator_mutation_answered_with_an_earlier_result_is_named() -> None:
    """lane close, lane open, lane close again: the second close answered with the first
    close's result (same position, duplicate_of) changed nothing; it is named."""
    story = clean_story()
    close = story._append(SHARD, "LANE_GATE", T0, dedup_key="m/auto-close", command_id="auto-close")
    opened = story._append(SHARD, "LANE_GATE", T0 + 5, dedup_key="m/auto-open",
                           command_id="auto-open")
    story._result(close, "APPLIED")
    story._result(opened, "APPLIED")

    def mutation(index: int, kind: Any, record: LogEntry, duplicate: int | None) -> Op:
        return Op(index=index, kind=kind, invoke_ms=T0 + index, complete_ms=T0 + index + 1,
                  ok=True, target="p1", receipts=[Receipt(
                      evidence="APPLIED", shard=SHARD, source_position=record.position,
                      command_id=record.command_id or "", kind="LANE_GATE", result="APPLIED",
                      duplicate_of=duplicate)])

    story.entries += [mutation(60, "lane_close", close, None),
                      mutation(61, "lane_open", opened, None),
                      mutation(62, "lane_close", close, close.position)]
    (violation,) = named(story, "operator_mutations_take_effect")
    assert "lane_close p1 (op 62)" in violation.text and "op 60's result" in violation.text


# -- lane isolation --------------------------------------------------------------------------
def test_a_healthy_lane_late_beside_a_faulted_one_is_named() -> None:
    """Lane local (healthy) read 8 s after deliverAt while only another lane was faulted."""
    story = Story()
    story.fault("destination", T0, T0 + 20_000, engine_wide=False, lanes=["ordered"])
    story.schedule("m1", T0 + 1_000)
    story.publish("m1", "att-1", at_ms=T0 + 9_000)
    (violation,) = named(story, "lane_isolation")
    assert "8005 ms after it was due" in violation.text


def test_lateness_across_an_engine_wide_fault_is_not_judged() -> None:
    """The engine was SIGSTOPped across m1's due time: late, but not a lane's fault."""
    story = Story()
    story.fault("sigstop", T0 + 500, T0 + 8_000)
    story.schedule("m1", T0 + 1_000)
    story.publish("m1", "att-1", at_ms=T0 + 9_000)
    assert check(story.lines()) == []


# -- due messages settle ---------------------------------------------------------------------
def test_a_due_message_left_scheduled_is_named() -> None:
    """Still SCHEDULED at the end, long after its deliverAt."""
    story = Story()
    story.schedule("m1", T0 + 1_000)
    (violation,) = named(story, "due_messages_settle")
    assert "still SCHEDULED" in violation.text


def test_a_message_behind_an_uncertain_ordered_head_may_wait() -> None:
    """k2 waits behind k1, UNCERTAIN on the same ORDERED key: not a stuck message."""
    story = Story()
    story.schedule("k1", T0 + 1_000, lane="ordered", key="a")
    story.schedule("k2", T0 + 1_100, lane="ordered", key="a")
    story.admit("k1", "att-k1", at_ms=T0 + 1_010)
    story.settle("k1", "att-k1", "UNKNOWN", at_ms=T0 + 1_020)
    assert check(story.lines()) == []


# -- engine starts -------------------------------------------------------------------------
def test_an_engine_start_that_never_answers_is_named() -> None:
    """A start asked for while a lane's destination hung never came up: named, with the
    lanes faulted before it; a start that answered in 2 s is not."""
    story = clean_story()
    story.fault("hang", T0, T0 + 90_000, engine_wide=False, lanes=["p1"])
    story.entries.append(EngineStart(requested_ms=T0 + 10, ready_ms=T0 + 2_010, pid=7))
    story.entries.append(EngineStart(requested_ms=T0 + 5_000, ready_ms=None, pid=8,
                                     error="not ready within 45 s"))
    (violation,) = named(story, "engine_starts")
    assert "never answered (not ready within 45 s)" in violation.text
    assert "lanes faulted before it: p1" in violation.text


# -- replay ----------------------------------------------------------------------------------
def test_a_replay_digest_unlike_the_live_one_is_named() -> None:
    """Replay from a checkpoint gives another digest; a replay that failed is named too."""
    story = clean_story()
    story.digest("replay:checkpoint:cp-2", "other")
    story.digest("replay:checkpoint:cp-3", "", error="the checkpoint is gone")
    violations = named(story, "replay_digests")
    assert {v.ids[1] for v in violations} == {"replay:checkpoint:cp-2",
                                              "replay:checkpoint:cp-3"}


def test_every_invariant_has_a_failing_history_here() -> None:
    """Each invariant the checker runs is named by at least one test of this module."""
    source = Path(__file__).read_text()
    missing = [name for name in INVARIANTS if f'"{name}"' not in source]
    assert missing == []


# -- properties ------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 3_000)), min_size=1,
                max_size=12))
def test_on_time_publishes_in_order_never_fire(times: list[tuple[int, int]]) -> None:
    """Any set of one key's messages published in (deliverAt, schedule order), each read at
    or after its deliverAt, passes every invariant."""
    story = Story()
    for n, (deliver, _) in enumerate(times):
        story.schedule(f"k{n}", T0 + 10_000 + deliver, lane="ordered", key="a")
    order = sorted(range(len(times)), key=lambda n: (times[n][0], n))
    clock = T0 + 10_000
    for n in order:
        clock = max(clock, T0 + 10_000 + times[n][0]) + times[n][1] % 7
        story.publish(f"k{n}", f"att-{n}", at_ms=clock)
        clock += 6
    assert check(story.lines()) == []


@settings(max_examples=60, deadline=None)
@given(st.permutations(list(range(6))))
def test_any_out_of_order_arrival_is_named(arrival: list[int]) -> None:
    """Six messages of one key, all pending at once, reach the destination in the order
    ``arrival``: ordered_lanes fires exactly when that is not deliverAt order, naming an
    inverted pair."""
    story = Story()
    for n in range(6):
        story.schedule(f"k{n}", T0 + 1_000 + n * 10, lane="ordered", key="a")
    for step, n in enumerate(arrival):
        story.publish(f"k{n}", f"att-{n}", at_ms=T0 + 2_000 + step * 10)
    violations = [v for v in check(story.lines()) if v.invariant == "ordered_lanes"]
    assert bool(violations) == (arrival != sorted(arrival))
    for violation in violations:
        first, second = (int(i[1:]) for i in violation.ids)
        assert first < second and arrival.index(second) < arrival.index(first)


def test_facts_index_the_records_by_position() -> None:
    """The checker's index finds a shard's record by position and by dedup key."""
    facts = Facts.of(lines_of(clean_story().entries_out()))
    record = facts.record_at(SHARD, 1)
    assert record is not None and isinstance(record.entry, LogEntry)
    assert facts.first_record(SHARD, "c/sched-m1") is record
    assert all(isinstance(line.entry, Seen) for line in facts.seen)
