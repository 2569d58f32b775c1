"""The workload is a pure, seeded plan: the same seed gives the same operations, and a plan
holds every kind of operation issue 37 §1 asks for, with the values that make them race."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.chaos.workload import WorkloadSpec, payload_for, plan

SPEC = WorkloadSpec(seed=5, ops=600, duration_s=30.0, lanes=("p1", "p2", "calm"),
                    ordered_lanes=("ord",), gated_lanes=("p1", "p2"), inline_limit=1_024)


def test_the_same_seed_gives_the_same_plan_and_another_seed_another() -> None:
    """Reproducible from its seed alone."""
    assert plan(SPEC) == plan(SPEC)
    assert plan(dataclasses.replace(SPEC, seed=6)) != plan(SPEC)


def test_a_plan_holds_every_kind_of_operation() -> None:
    """Schedules, cancels, reschedules, retries, operator mutations in pairs, queries with
    and without the barrier; invoked in time order."""
    ops = plan(SPEC)
    kinds = {op.kind for op in ops}
    assert kinds == {"schedule", "cancel", "reschedule", "retry", "lane_close", "lane_open",
                     "shard_pause", "shard_resume", "attempt_resolve", "query",
                     "query_barrier"}
    assert [op.at_ms for op in ops] == sorted(op.at_ms for op in ops)
    assert sum(op.kind == "lane_close" for op in ops) == sum(op.kind == "lane_open" for op in ops)


def test_payloads_span_the_inline_limit_and_ordered_keys_are_few() -> None:
    """Empty, small, exactly at and just above the inline limit (the object-store path);
    an ORDERED lane's messages share at most three keys."""
    schedules = [op for op in plan(SPEC) if op.kind == "schedule"]
    sizes = {op.payload_bytes for op in schedules}
    assert {0, 1_024, 1_025} <= sizes and any(s > 1_025 for s in sizes)
    keys = {op.key for op in schedules if op.lane == "ord"}
    assert 1 < len(keys) <= 3


def test_cancels_and_reschedules_race_their_targets_due_time() -> None:
    """Each is invoked within 400 ms of its target's deliverAt (or right after the schedule
    when that is already past), and every retry names an earlier command."""
    ops = plan(SPEC)
    by_ref = {op.ref: op for op in ops}
    for op in ops:
        if op.kind in ("cancel", "reschedule"):
            target = by_ref[op.of or ""]
            assert target.deliver_offset_ms is not None
            assert op.at_ms == target.at_ms + 1 or \
                abs(op.at_ms - target.deliver_offset_ms) <= 400
        if op.kind == "retry":
            assert by_ref[op.of or ""].at_ms <= op.at_ms


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=8), st.integers(0, 5_000))
def test_payloads_are_deterministic_and_of_their_size(ref: str, size: int) -> None:
    """An op's payload depends on its ref and size alone, and has that size."""
    assert payload_for(ref, size) == payload_for(ref, size)
    assert len(payload_for(ref, size)) == size
