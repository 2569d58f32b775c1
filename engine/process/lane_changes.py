"""What a new configuration changes for a running engine's lanes (a cluster's
configuration record changed, and the node heard of it through a notification).

Applied at once: a new lane (its publisher starts; every shard may claim for it), and a
lane's handoff lead or ordering (each shard loop replicates it into the lane's policy with
LANE_CONFIG, which the state machine refuses where messages already rely on the old one).
Not applied while running: a lane's destination settings (topic, brokers, path) and a
removed lane — the node says so, and a restart applies them. Routes never change here: a
partition count never changes, and ``nereus cluster init --replace`` refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from nereus.config import Config, LaneSettings

# the settings the running engine applies; any other difference needs a restart
_LIVE_FIELDS = frozenset({"lead_ms", "ordered", "max_delay", "max_pending", "retention",
                          "dedup_window"})


@dataclass(frozen=True, slots=True)
class LaneChanges:
    added: list[str] = field(default_factory=list)
    policy: list[str] = field(default_factory=list)  # lead or ordering changed
    needs_restart: list[str] = field(default_factory=list)  # destination settings, removal

    def __bool__(self) -> bool:
        return bool(self.added or self.policy or self.needs_restart)


def lane_changes(old: Config, new: Config) -> LaneChanges:
    """How ``new``'s lanes differ from ``old``'s."""
    changes = LaneChanges()
    for name in sorted(set(old.lanes) | set(new.lanes)):
        before, after = old.lanes.get(name), new.lanes.get(name)
        if before is None:
            changes.added.append(name)
        elif after is None:
            changes.needs_restart.append(name)
        elif before != after:
            differ = _differing(before, after)
            if differ & _LIVE_FIELDS:
                changes.policy.append(name)
            if differ - _LIVE_FIELDS:
                changes.needs_restart.append(name)
    return changes


def _differing(a: LaneSettings, b: LaneSettings) -> set[str]:
    left, right = msgspec.structs.asdict(a), msgspec.structs.asdict(b)
    return {key for key in left if left[key] != right[key]}
