"""A step of the wall clock forwards while the engine runs is not trusted: decisions wait
as long as the step until a restart, and ``engine status`` says so instead of leaving an
operator to wonder why every message is late by the same few seconds."""

from __future__ import annotations

from pathlib import Path

from nereus.adapters.admin.wire import MessageExplanation
from nereus.engine.admin.api import AdminApi
from nereus.errors import NotFound
from tests.fake_clock import FakeClock
from tests.integration.engine_harness import in_process_engine, now_ms
from tests.polling import wait_until


def test_status_names_a_step_forwards_and_the_held_back_time(tmp_path: Path) -> None:
    """Healthy before; after the wall clock steps 8 s forwards, status is not healthy, its
    problems name the step and the restart, and trusted_time reports it held back; a message
    due at the stepped wall time is not published until the engine's time catches up."""
    clock = FakeClock(wall_ms=now_ms())
    with in_process_engine(tmp_path / "home", partitions=1, time_source=clock) as h:
        api = AdminApi(h.engine)
        before = api.status()
        assert before.healthy and before.trusted_time.problem is None
        clock.step_wall(8_000)
        after = api.status()
        assert after.trusted_time.held_back_ms == 8_000
        assert not after.healthy
        (problem,) = [p for p in after.problems if p.startswith("Trusted UTC: ")]
        assert "stepped forwards by about 8,000 ms" in problem and "restart" in problem
        h.queue([h.schedule("m-1", clock.wall_ms() - 1_000)])  # due by the stepped clock
        wait_until("the schedule applied, its lane READY", lambda: _lane_ready(api, "m-1"), 10)
        held = _explained(api, "m-1")
        assert held is not None and held.held_by == "trusted_time"
        (gate,) = [g for g in held.gates if g.gate == "trusted_time"]
        assert "stepped forwards by about 8,000 ms" in gate.detail
        assert h.outbox() == []
        clock.advance(7.5)  # the engine's earliest reaches the message's deliver_at
        wait_until("the message published", lambda: len(h.outbox()) == 1, 10)


def _lane_ready(api: AdminApi, delay_message_id: str) -> bool:
    """The message is applied and its lane's publisher is up (readiness comes before
    trusted_time among the gates, and a busy machine may start the publisher late)."""
    explained = _explained(api, delay_message_id)
    return explained is not None and not any(
        g.holds for g in explained.gates if g.gate == "readiness")


def _explained(api: AdminApi, delay_message_id: str) -> MessageExplanation | None:
    try:
        return api.explain(delay_message_id)
    except NotFound:
        return None
