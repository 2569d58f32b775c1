"""The engine replicates each lane's configured handoff lead, and never lowers it under
messages that rely on it.

A Pulsar ``deliver_at`` lane may be handed a message ``lead_ms`` before deliverAt (Pulsar
holds it until then). The engine writes that lead into the lane's replicated policy at
activation (LANE_CONFIG), so apply derives actionAt = deliverAt - lead for SCHEDULE and
RESCHEDULE alike. Restarted with a shorter lead while a message relies on the longer one,
the change is refused (LEAD_IN_USE) and the planner still waits for deliverAt less the
lead the destination really has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.records import Disposition, Outcome
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, Result, decode_value
from nereus.views import find_message
from tests.integration.doubles import QuietDestination
from tests.integration.engine_harness import in_process_engine, now_ms
from tests.polling import wait_until


def handoff_lane(lead_ms: int) -> str:
    return (f'[lanes.held]\ndestination = "pulsar"\nhandoff = "deliver_at"\n'
            f"lead_ms = {lead_ms}\n")


class Holding(QuietDestination):
    """Stands in for Pulsar's deliver_at handoff: records what it was handed, and when."""

    name = "held"

    def __init__(self) -> None:
        self.handed: dict[str, int] = {}

    def publish(self, requests: Sequence[PublishRequest],
                now: Callable[[], int]) -> list[PublishResult]:
        for request in requests:
            self.handed[request.template.delay_message_id] = now()
        return [PublishResult(r.attempt_id, Outcome.PUBLISHED, Disposition.NONE, "held")
                for r in requests]


def replicated_lead(store: ShardStore, lane: str = "held") -> int:
    raw = store.get(keys.lane_key(lane))
    return 0 if raw is None else decode_value(raw, Lane).handoff_lead_ms


def test_the_configured_lead_is_replicated_and_used_for_action_times(tmp_path: Path) -> None:
    """Every shard's lane policy carries lead 3 s; a schedule without actionAt gets
    deliverAt - 3 s, a reschedule too."""
    home = tmp_path / "home"
    with in_process_engine(home, partitions=2, lanes=handoff_lane(3_000),
                        destinations={"held": Holding()}) as h:
        for loop in h.engine.shards.values():
            assert replicated_lead(loop.store) == 3_000
        deliver = now_ms() + 60_000
        h.queue([h.schedule("m1", deliver, lane="held")])
        loop = h.engine.shards[h.route.shard_for("m1")]
        wait_until("m1 applied", lambda: find_message(loop.store, "m1") is not None, 10)
        message = find_message(loop.store, "m1")
        assert message is not None and message.action_at_ms == deliver - 3_000
        h.queue([h.reschedule("m1", deliver + 10_000)])
        wait_until("the reschedule applied",
                   lambda: (m := find_message(loop.store, "m1")) is not None
                   and m.generation == 2, 10)
        moved = find_message(loop.store, "m1")
        assert moved is not None and moved.action_at_ms == deliver + 7_000


def test_a_shorter_lead_is_refused_while_a_message_relies_on_the_longer(
        tmp_path: Path) -> None:
    """Restarted with lead 1 s while m1 waits with actionAt = deliverAt - 4 s: the policy
    keeps 4 s (LEAD_IN_USE) and m1 is handed over no earlier than deliverAt - 1 s."""
    home = tmp_path / "home"
    deliver = now_ms() + 6_000
    with in_process_engine(home, partitions=1, lanes=handoff_lane(4_000),
                        destinations={"held": Holding()}) as h:
        h.queue([h.schedule("m1", deliver, lane="held")])
        (loop,) = h.engine.shards.values()
        wait_until("m1 applied", lambda: find_message(loop.store, "m1") is not None, 10)
    holding = Holding()
    with in_process_engine(home, partitions=1, lanes=handoff_lane(1_000),
                        destinations={"held": holding}) as h:
        loop = h.engine.shards[ShardId("default", 0)]
        assert replicated_lead(loop.store) == 4_000
        refused = [decode_value(raw, Result) for _, raw in loop.store.scan_prefix(
            keys.result_key("m/config:held:handoff_lead_ms=1000"))]
        assert [r.reason for r in refused] == ["LEAD_IN_USE"], refused
        wait_until("m1 handed to the destination", lambda: "m1" in holding.handed, 20)
        assert holding.handed["m1"] >= deliver - 1_000
