"""What each configured lane asks of its replicated policy, and the records that replicate it.

Apply reads a lane's lead, ordering, limits, retention and dedup window only from
replicated state (LANE_CONFIG, LANE_LIMITS), the shard's window from SHARD_RETENTION and
its ``[shard]`` limits from SHARD_LIMITS — never from the configuration of whoever applies.
The owner compares the configured values (``LanePolicies``) with the replicated ones at
activation and on every configuration change and appends a record for each difference
(``policy_records``), asking for the retention catch-ups (``catch_up``, ``catch_up_kept``);
apply may refuse a change messages rely on (``LEAD_IN_USE``, ``ORDERING_IN_USE``), and the
owner says so (``report``). Every record names the owner and epoch that wrote it, so a
replaced owner's is STALE ``FENCED``.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from nereus.config import Config
from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.machine import DEFAULT_LIMITS, Limits
from nereus.records import LaneConfig, LaneLimits, ResultStatus, ShardLimits, ShardRetention
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, LaneLimit, Result, ShardRetentionValue, decode_value

PolicyRecord = LaneConfig | LaneLimits | ShardRetention | ShardLimits


@dataclass(slots=True)
class LanePolicies:
    """Each configured lane's handoff lead, ordering and limits, by lane name, and the
    shard's own dedup window (its route's; None: not replicated). Updated in place
    (``update``): the planner holds ``leads``."""

    leads: dict[str, int]
    ordered: dict[str, bool]
    limits: dict[str, LaneLimit]
    shard_dedup_window_ms: int | None = None
    shard_limits: Limits | None = None  # the [shard] table (None: not replicated)

    @classmethod
    def of(cls, config: Config, route: str | None = None) -> LanePolicies:
        """The configured lanes' policies, with ``route``'s dedup window for its shards."""
        lanes = config.lanes
        window = None if route is None or route not in config.routes else \
            config.routes[route].dedup_window_ms
        return cls(leads={name: lane.handoff_lead_ms for name, lane in lanes.items()},
                   ordered={name: lane.ordered for name, lane in lanes.items()},
                   limits={name: LaneLimit(lane=name, max_delay_ms=lane.max_delay_ms,
                                           max_pending=lane.max_pending,
                                           retention_ms=lane.retention_ms,
                                           dedup_window_ms=lane.dedup_window_ms)
                           for name, lane in lanes.items()},
                   shard_dedup_window_ms=window, shard_limits=config.limits)

    @classmethod
    def none(cls) -> LanePolicies:
        return cls(leads={}, ordered={}, limits={})

    def update(self, other: LanePolicies) -> None:
        self.leads.update(other.leads)
        self.ordered.update(other.ordered)
        self.limits.update(other.limits)
        if other.shard_dedup_window_ms is not None:
            self.shard_dedup_window_ms = other.shard_dedup_window_ms
        if other.shard_limits is not None:
            self.shard_limits = other.shard_limits


Found = list[tuple[str, str, PolicyRecord]]  # (lane or "*", the changes in words, record)


def policy_records(store: ShardStore, policies: LanePolicies, *, owner_id: str,
                   epoch: int) -> Found:
    """The records that replicate each configured lane's policy where the replicated lane
    says otherwise: (lane, the changes in words, record)."""
    return (_lane_configs(store, policies, owner_id, epoch)
            + _lane_limits(store, policies, owner_id, epoch)
            + _shard_retention(store, policies, owner_id, epoch)
            + _shard_limits(store, policies, owner_id, epoch))


def _lane_configs(store: ShardStore, policies: LanePolicies, owner_id: str,
                  epoch: int) -> Found:
    found: Found = []
    fence = {"owner_id": owner_id, "fencing_epoch": epoch}
    for name in sorted(set(policies.leads) | set(policies.ordered)):
        raw = store.get(keys.lane_key(name))
        lane = decode_value(raw, Lane) if raw else Lane(name=name)
        changes: dict[str, int | bool] = {}
        lead = policies.leads.get(name, 0)
        if lane.handoff_lead_ms != lead:
            changes["handoff_lead_ms"] = lead
        if lane.ordered != policies.ordered.get(name, False):
            changes["ordered"] = policies.ordered.get(name, False)
        if changes:
            listed = ",".join(f"{k}={v}" for k, v in changes.items())
            found.append((name, listed, LaneConfig(
                lane=name, operator=f"engine {owner_id}",
                reason=f"lane {name} as configured: {listed}",
                idempotency_key=f"config:{name}:{listed}:{owner_id}:{epoch}",
                **fence, **changes)))  # type: ignore[arg-type]
    return found


def _lane_limits(store: ShardStore, policies: LanePolicies, owner_id: str,
                 epoch: int) -> Found:
    found: Found = []
    for name, wanted in sorted(policies.limits.items()):
        raw = store.get(keys.lane_limits_key(name))
        held = decode_value(raw, LaneLimit) if raw else LaneLimit(lane=name)
        if _limit_values(held) == _limit_values(wanted):
            continue
        listed = f"max_delay_ms={wanted.max_delay_ms},max_pending={wanted.max_pending}"
        if isinstance(wanted.retention_ms, int) and isinstance(wanted.dedup_window_ms, int):
            listed += (f",retention_ms={wanted.retention_ms},"
                       f"dedup_window_ms={wanted.dedup_window_ms}")
        found.append((name, listed, LaneLimits(
            lane=name, operator=f"engine {owner_id}",
            reason=f"lane {name} as configured: {listed}",
            idempotency_key=f"limits:{name}:{listed}:{owner_id}:{epoch}",
            max_delay_ms=wanted.max_delay_ms, max_pending=wanted.max_pending,
            retention_ms=wanted.retention_ms, dedup_window_ms=wanted.dedup_window_ms,
            catch_up=True, catch_up_kept=True, owner_id=owner_id, fencing_epoch=epoch)))
    return found


def _shard_retention(store: ShardStore, policies: LanePolicies, owner_id: str,
                     epoch: int) -> Found:
    window = policies.shard_dedup_window_ms
    if window is None:
        return []
    raw = store.get(keys.META_SHARD_RETENTION)
    holds = None if raw is None else decode_value(raw, ShardRetentionValue).dedup_window_ms
    if holds == window:
        return []
    listed = f"dedup_window_ms={window}"
    return [("*", listed, ShardRetention(
        operator=f"engine {owner_id}", reason=f"shard dedup window as configured: "
        f"{listed}", idempotency_key=f"shard-retention:{listed}:{owner_id}:{epoch}",
        dedup_window_ms=window, catch_up=True, catch_up_results=True,
        owner_id=owner_id, fencing_epoch=epoch))]


def _shard_limits(store: ShardStore, policies: LanePolicies, owner_id: str,
                  epoch: int) -> Found:
    limits = policies.shard_limits
    if limits is None:
        return []
    raw = store.get(keys.META_SHARD_LIMITS)
    in_force = DEFAULT_LIMITS if raw is None else decode_value(raw, Limits)
    if in_force == limits:  # DEFAULT_LIMITS bind a shard that never had its own
        return []
    listed = ",".join(f"{name}={value}" for name, value in
                      msgspec.structs.asdict(limits).items()
                      if value != getattr(in_force, name))
    return [("*", listed, ShardLimits(
        operator=f"engine {owner_id}", reason=f"[shard] limits as configured: "
        f"{listed}", idempotency_key=f"shard-limits:{listed}:{owner_id}:{epoch}",
        limits=limits, owner_id=owner_id, fencing_epoch=epoch))]


def _limit_values(limits: LaneLimit) -> tuple[object, ...]:
    return (limits.max_delay_ms, limits.max_pending, limits.retention_ms,
            limits.dedup_window_ms)


def report(store: ShardStore, records: list[tuple[str, str, PolicyRecord]], *,
           shard: ShardId, events: EventLog) -> None:
    """Log what became of each applied policy record (applied, or refused and why)."""
    for name, listed, record in records:
        raw = store.get(keys.result_key(f"m/{record.idempotency_key}"))
        result = None if raw is None else decode_value(raw, Result)
        if result is not None and result.status == ResultStatus.APPLIED:
            safe_event(events, "lane_policy_replicated", shard=str(shard), lane=name,
                       changes=listed)
        else:
            safe_event(events, "lane_policy_refused", level="error", shard=str(shard),
                       lane=name, changes=listed,
                       detail=None if result is None else result.detail)

