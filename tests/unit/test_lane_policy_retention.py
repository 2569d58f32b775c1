"""The owner replicates a lane's configured retention and dedup window with its limits
(``engine/shard/lane_policy.py``): a shard whose limits predate them gets one LANE_LIMITS carrying
both; a shard that already holds them gets none."""

from __future__ import annotations

from pathlib import Path

from nereus.config import parse_config
from nereus.engine.shard.lane_policy import LanePolicies, policy_records
from nereus.records import LaneLimits
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity, LaneLimit, encode_value

IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
CONFIG = ('[routes.default]\nlog = "file"\n\n[lanes.local]\ndestination = "file"\n'
          'path = "x"\nretention = "2s"\n')


def test_limits_from_before_retention_are_replicated_again_with_it(tmp_path: Path) -> None:
    """Held: max_delay 400 d, no retention. Configured: retention 2 s, dedup_window the
    default 7 d: one LANE_LIMITS with both; once held, nothing more."""
    policies = LanePolicies.of(parse_config(CONFIG))
    with ShardStore.open(tmp_path / "db", identity=IDENTITY, create=True) as store:
        store.write({keys.lane_limits_key("local"): encode_value(
            LaneLimit(lane="local", max_delay_ms=400 * 86_400_000))})
        found = [record for _, _, record in policy_records(store, policies, owner_id="o",
                                                            epoch=1)
                 if isinstance(record, LaneLimits)]
        assert [(r.retention_ms, r.dedup_window_ms) for r in found] == [
            (2_000, 7 * 86_400_000)]
        store.write({keys.lane_limits_key("local"): encode_value(policies.limits["local"])})
        assert not [record for _, _, record in policy_records(store, policies, owner_id="o",
                                                               epoch=1)
                    if isinstance(record, LaneLimits)]
