"""The lane mutations (LANE_GATE, LANE_CONFIG, LANE_LIMITS): a lane opened, closed or
paused, its destination settings, its replicated limits and the catch-up a changed retention
asks for. ``control.operator_mutation`` checks identity, reason and precondition first.
"""

from __future__ import annotations

import msgspec

from nereus.machine.reasons import Reason
from nereus.machine.tx import Tx
from nereus.machine.validate import check_lane
from nereus.machine.verdict import Verdict, applied, rejected
from nereus.records.operator import LaneConfig, LaneGate, LaneLimits
from nereus.records.vocabulary import UNFINISHED_STATES, MessageState
from nereus.state import keys
from nereus.state.values import LaneLimit, RetainCatchUp, encode_value


def lane_gate(tx: Tx, mutation: LaneGate) -> Verdict:
    failure = check_lane(mutation.lane)
    if failure is not None:
        return failure
    lane = tx.lane(mutation.lane)
    if lane.gate == mutation.gate:
        return applied(f"lane {lane.name} admissionGate was already {lane.gate}")
    tx.put_lane(msgspec.structs.replace(lane, gate=mutation.gate, gate_position=tx.position))
    return applied(f"lane {lane.name} admissionGate {lane.gate} -> {mutation.gate}")


def lane_config(tx: Tx, mutation: LaneConfig) -> Verdict:
    failure = check_lane(mutation.lane)
    if failure is not None:
        return failure
    bounds = {"capacity": 1, "quota": 1, "retry_max": 1, "retry_backoff_ms": 0,
              "handoff_lead_ms": 0, "unavailable_max": 1}
    changes: dict[str, object] = {}
    for field, minimum in bounds.items():
        value = getattr(mutation, field)
        if value is not None:
            if value < minimum:
                return rejected(Reason.INVALID_FIELD, f"{field} must be at least {minimum}")
            changes[field] = value
    if mutation.ordered is not None:
        changes["ordered"] = mutation.ordered
    if not changes:
        return rejected(Reason.INVALID_FIELD, "LANE_CONFIG changes nothing")
    lane = tx.lane(mutation.lane)
    lead = mutation.handoff_lead_ms
    scheduled = lane.counts.get(MessageState.SCHEDULED, 0)
    if lead is not None and lead < lane.handoff_lead_ms and scheduled:
        return rejected(
            Reason.LEAD_IN_USE,
            f"lane {lane.name} has {scheduled} SCHEDULED messages whose actionAt may rely on "
            f"its handoff lead of {lane.handoff_lead_ms} ms; lowering it to {lead} ms could "
            "publish them before deliverAt. Let them publish (or cancel/reschedule them) first",
        )
    pending = sum(lane.counts.get(state, 0) for state in UNFINISHED_STATES)
    if mutation.ordered is not None and mutation.ordered != lane.ordered and pending:
        was = "with" if lane.ordered else "without"
        return rejected(
            Reason.ORDERING_IN_USE,
            f"lane {lane.name} has {pending} unfinished messages placed and scheduled {was} "
            f"per-key order; making it {'ORDERED' if mutation.ordered else 'unordered'} now "
            "could not keep their order or placement. Let them finish first",
        )
    listed = ", ".join(f"{k}={v}" for k, v in sorted(changes.items()))
    if all(getattr(lane, field) == value for field, value in changes.items()):
        return applied(f"lane {lane.name} config was already {listed} (revision "
                       f"{lane.config_revision})")
    tx.put_lane(msgspec.structs.replace(
        lane, config_revision=lane.config_revision + 1, **changes
    ))
    return applied(f"lane {lane.name} config revision {lane.config_revision + 1}: {listed}")


def lane_limits(tx: Tx, mutation: LaneLimits) -> Verdict:
    failure = check_lane(mutation.lane)
    if failure is not None:
        return failure
    for field in ("max_delay_ms", "max_pending", "retention_ms", "dedup_window_ms"):
        value = getattr(mutation, field)
        if isinstance(value, int) and value < 0:
            return rejected(Reason.INVALID_FIELD, f"{field} must be 0 (no limit) or more")
    before = tx.lane_limits(mutation.lane)
    # retention fields left UNSET keep what was replicated (a LANE_LIMITS from before them)
    retention_ms = mutation.retention_ms if before is None or isinstance(
        mutation.retention_ms, int) else before.retention_ms
    dedup_window_ms = mutation.dedup_window_ms if before is None or isinstance(
        mutation.dedup_window_ms, int) else before.dedup_window_ms
    kept_since, later = _kept_catch_up(tx, mutation, before, retention_ms, dedup_window_ms)
    limits = LaneLimit(lane=mutation.lane, max_delay_ms=mutation.max_delay_ms,
                       max_pending=mutation.max_pending, position=tx.position,
                       retention_ms=retention_ms, dedup_window_ms=dedup_window_ms,
                       catch_up=_catch_up(tx, mutation, before, retention_ms, dedup_window_ms),
                       kept_since=kept_since, later_catch_ups=later)
    if before is not None and _limit_values(before) == _limit_values(limits):
        return applied(f"lane {mutation.lane} limits were already {_limits_text(limits)}")
    tx.put(keys.lane_limits_key(mutation.lane), encode_value(limits))
    return applied(f"lane {mutation.lane} limits: {_limits_text(limits)}")


# a lane's ``kept_since`` and ``later_catch_ups``
_KeptCatchUps = tuple[int | msgspec.UnsetType, tuple[RetainCatchUp, ...] | msgspec.UnsetType]


def _catch_up(tx: Tx, mutation: LaneLimits, before: LaneLimit | None,
              retention_ms: int | msgspec.UnsetType,
              dedup_window_ms: int | msgspec.UnsetType) -> RetainCatchUp | msgspec.UnsetType:
    """The lane's catch-up: kept once set; set by a LANE_LIMITS asking for it (``catch_up``)
    that is the first to give the lane a retention — before it no message of the lane ever
    had a ``retain`` entry (a retention, once replicated, is never UNSET again)."""
    if before is not None and isinstance(before.catch_up, RetainCatchUp):
        return before.catch_up
    first = before is None or not isinstance(before.retention_ms, int)
    if mutation.catch_up is not True or not first or not isinstance(retention_ms, int) \
            or not retention_ms:
        return msgspec.UNSET
    window = dedup_window_ms if isinstance(dedup_window_ms, int) else 0
    return RetainCatchUp(before_position=tx.position,
                         expire_at_ms=keys.expire_at(tx.broker_ms, retention_ms),
                         result_until_ms=keys.expire_at(tx.broker_ms, window) if window else 0)


def _kept_catch_up(tx: Tx, mutation: LaneLimits, before: LaneLimit | None,
                   retention_ms: int | msgspec.UnsetType,
                   dedup_window_ms: int | msgspec.UnsetType) -> _KeptCatchUps:
    """The lane's ``kept_since`` and ``later_catch_ups`` after this record.

    Only a record asking for it (``catch_up_kept``) changes them: one that makes the
    retention 0 (kept) records where (0 when it had none before: every message so far was
    kept too); one that gives a retention back after it was 0 adds a catch-up for the
    messages that ended from then to now (from where the last LANE_LIMITS was applied when
    the 0 came from a record that did not say where: later messages only, never one that
    has an entry of its own)."""
    kept_since = msgspec.UNSET if before is None else before.kept_since
    later = msgspec.UNSET if before is None else before.later_catch_ups
    if mutation.catch_up_kept is not True or not isinstance(retention_ms, int):
        return kept_since, later
    was = msgspec.UNSET if before is None else before.retention_ms
    if retention_ms == 0:
        if was != 0:  # kept from here (and everything before, when it had no retention)
            kept_since = tx.position if isinstance(was, int) else 0
        return kept_since, later
    if was != 0 or before is None:
        return kept_since, later
    after = kept_since if isinstance(kept_since, int) else before.position
    window = dedup_window_ms if isinstance(dedup_window_ms, int) else 0
    given_back = RetainCatchUp(
        before_position=tx.position, expire_at_ms=keys.expire_at(tx.broker_ms, retention_ms),
        result_until_ms=keys.expire_at(tx.broker_ms, window) if window else 0,
        after_position=after)
    return msgspec.UNSET, (*(later if isinstance(later, tuple) else ()), given_back)


def _limit_values(limits: LaneLimit) -> tuple[object, ...]:
    return (limits.max_delay_ms, limits.max_pending, limits.retention_ms,
            limits.dedup_window_ms)


def _limits_text(limits: LaneLimit) -> str:
    text = (f"max_delay_ms={limits.max_delay_ms or 'none'}, "
            f"max_pending={limits.max_pending or 'none'}")
    for name in ("retention_ms", "dedup_window_ms"):
        value = getattr(limits, name)
        if isinstance(value, int):
            text += f", {name}={value or 'kept'}"
    return text
