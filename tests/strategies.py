"""Hypothesis strategies for records (shared by codec and state-machine property tests)."""

from __future__ import annotations

import msgspec
from hypothesis import strategies as st

from nereus import records as r
from nereus.machine import Limits

ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
times = st.integers(min_value=0, max_value=2**48)
opt_times = st.none() | times
small_text = st.text(max_size=20)
headers = st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4)
lanes = st.sampled_from(["local", "slow", "other-1"])

schedules = st.builds(
    r.Schedule, command_id=ids, delay_message_id=ids, lane=lanes, deliver_at_ms=times,
    action_at_ms=times, expire_at_ms=opt_times, key=st.none() | small_text, headers=headers,
    payload=st.binary(max_size=64), payload_ref=st.none() | ids,
)
cancels = st.builds(r.Cancel, command_id=ids, delay_message_id=ids)
reschedules = st.builds(r.Reschedule, command_id=ids, delay_message_id=ids, deliver_at_ms=times,
                        action_at_ms=times, expire_at_ms=opt_times)
barriers = st.builds(r.QueryBarrier, command_id=ids)
reserves = st.builds(r.PayloadReserve, command_id=ids, payload_id=ids,
                     size_bytes=st.integers(0, 10**9),
                     sha256=st.text("0123456789abcdef", min_size=64, max_size=64),
                     expires_at_ms=times)
commits = st.builds(r.PayloadCommit, command_id=ids, payload_id=ids,
                    size_bytes=st.integers(0, 10**9),
                    sha256=st.text("0123456789abcdef", min_size=64, max_size=64), object_key=ids)
admissions = st.builds(
    r.PublishAdmission, attempt_id=ids, delay_message_id=ids, generation=st.integers(0, 5),
    work_digest=ids, lane=lanes, claim_id=ids, claim_sequence=st.integers(0, 100), owner_id=ids,
    fencing_epoch=st.integers(0, 5), prepared_digest=ids, decided_earliest_ms=times,
    decided_latest_ms=times,
)
outcomes = st.builds(
    r.PublishOutcome, outcome_id=ids, attempt_id=ids, delay_message_id=ids, owner_id=ids,
    fencing_epoch=st.integers(0, 5), outcome=st.sampled_from(r.Outcome),
    disposition=st.sampled_from(r.Disposition), evidence=small_text,
)
claim_results = st.builds(
    r.ClaimResult, mutation_id=ids, delay_message_id=ids, generation=st.integers(0, 5),
    work_digest=ids, owner_id=ids, fencing_epoch=st.integers(0, 5),
    disposition=st.sampled_from(r.ClaimDisposition), detail=small_text,
    decided_earliest_ms=times, decided_latest_ms=times,
)
activations = st.builds(r.ActivationBarrier, barrier_id=ids, owner_id=ids,
                        fencing_epoch=st.integers(0, 5))
marks = st.builds(r.CheckpointMark, mutation_id=ids, checkpoint_id=ids, owner_id=ids,
                  fencing_epoch=st.integers(0, 5))
operator_fields = {"operator": small_text, "reason": small_text, "idempotency_key": small_text,
                   "precondition_digest": st.none() | ids}
lane_gates = st.builds(r.LaneGate, lane=lanes, gate=st.sampled_from(r.Gate), **operator_fields)
lane_configs = st.builds(r.LaneConfig, lane=lanes, capacity=st.none() | st.integers(0, 10),
                         quota=st.none() | st.integers(0, 10),
                         retry_max=st.none() | st.integers(0, 10),
                         retry_backoff_ms=st.none() | st.integers(0, 10_000),
                         unavailable_max=st.none() | st.integers(0, 30),
                         handoff_lead_ms=st.none() | st.integers(0, 5_000),
                         ordered=st.none() | st.booleans(), **operator_fields)
resolves = st.builds(r.AttemptResolve, attempt_id=ids, resolution=st.sampled_from(r.Resolution),
                     evidence=small_text, **operator_fields)
breaks = st.builds(r.MessageBreak, delay_message_id=ids, **operator_fields)
pauses = st.builds(r.ShardPause, **operator_fields)
resumes = st.builds(r.ShardResume, **operator_fields)
lane_limits = st.builds(r.LaneLimits, lane=lanes, max_delay_ms=st.integers(0, 10_000),
                        max_pending=st.integers(0, 10),
                        retention_ms=st.just(msgspec.UNSET) | st.integers(0, 10_000),
                        dedup_window_ms=st.just(msgspec.UNSET) | st.integers(0, 10_000),
                        catch_up=st.just(msgspec.UNSET) | st.booleans(),
                        catch_up_kept=st.just(msgspec.UNSET) | st.booleans(),
                        **operator_fields)
backfills = st.builds(r.RetainBackfill, mutation_id=ids, owner_id=ids,
                      fencing_epoch=st.integers(0, 5),
                      delay_message_ids=st.lists(ids, max_size=3).map(tuple),
                      payload_ids=st.just(msgspec.UNSET) | st.lists(ids, max_size=3).map(tuple),
                      result_keys=st.just(msgspec.UNSET) | st.lists(
                          ids.map(lambda i: "c/" + i), max_size=3).map(tuple),
                      reject_positions=st.just(msgspec.UNSET) | st.lists(
                          st.integers(-2, 40), max_size=3).map(tuple))
shard_retentions = st.builds(r.ShardRetention, dedup_window_ms=st.integers(0, 10_000),
                             catch_up=st.just(msgspec.UNSET) | st.booleans(),
                             catch_up_results=st.just(msgspec.UNSET) | st.booleans(),
                             **operator_fields)
sweeps = st.builds(r.Sweep, mutation_id=ids, owner_id=ids, fencing_epoch=st.integers(0, 5),
                   entries=st.lists(st.binary(max_size=24), max_size=3).map(tuple))
engine_fences: st.SearchStrategy[dict[str, object]] = st.one_of(
    st.just({}), st.fixed_dictionaries({"owner_id": ids, "fencing_epoch": st.integers(0, 5)}))
shard_limits = st.builds(
    lambda fence, **kw: r.ShardLimits(**kw, **fence), engine_fences,
    limits=st.builds(Limits, max_headers=st.integers(1, 80), max_id_bytes=st.integers(1, 300),
                     max_clock_ahead_ms=st.integers(1, 5_000)),
    **operator_fields)
identities = st.builds(r.RouteIdentity, route_id=ids, route=lanes,
                       partition=st.integers(0, 8), partitions=st.integers(1, 9))

any_record = st.one_of(
    schedules, cancels, reschedules, barriers, reserves, commits, admissions, outcomes,
    claim_results, activations, marks, lane_gates, lane_configs, resolves, breaks, pauses,
    resumes, identities, lane_limits, sweeps, shard_retentions, backfills, shard_limits,
)
