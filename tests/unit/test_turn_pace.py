"""The turn pace: how many claims a round may make so a shard's turn stays near its target."""

from __future__ import annotations

import pytest

from nereus.engine.scheduler.pace import TurnPace


def test_no_allowance_until_a_turn_was_measured() -> None:
    """Before any turn that did work, a round is not limited."""
    pace = TurnPace(25.0)
    assert pace.allowance() is None
    pace.turn_took(3.0, 0)  # a turn that did nothing says nothing of the cost
    assert pace.allowance() is None


def test_the_allowance_is_what_keeps_the_next_turn_near_its_target() -> None:
    """At 0.1 ms a unit and two units a claim, 25 ms allows 125 claims."""
    pace = TurnPace(25.0)
    pace.turn_took(10.0, 100)
    assert pace.cost_ms == pytest.approx(0.1)
    assert pace.allowance() == 125


def test_a_slow_turn_lowers_the_allowance_gradually_and_never_below_the_floor() -> None:
    """The cost is averaged over turns: one slow turn moves it a fifth of the way; however
    slow the turns, a round may still claim ``floor``."""
    pace = TurnPace(25.0, floor=32)
    pace.turn_took(10.0, 100)
    pace.turn_took(100.0, 100)  # 1 ms a unit this once
    assert pace.cost_ms == pytest.approx(0.1 + 0.2 * 0.9)
    assert pace.allowance() == int(25.0 / (2 * pace.cost_ms))
    for _ in range(50):
        pace.turn_took(1_000.0, 10)
    assert pace.allowance() == 32


def test_a_target_of_zero_turns_the_pace_off() -> None:
    """``turn_target_ms = 0``: rounds are bounded by the lanes' budgets alone."""
    pace = TurnPace(0.0)
    pace.turn_took(500.0, 10)
    assert pace.allowance() is None
