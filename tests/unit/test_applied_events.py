"""``Applied.events``: what one record did, typed, so the shell never reads the key schema:
work scheduled, an admission won (its obligation opened) or refused, an attempt settled
(its obligation closed), and a control record; a re-delivery has no record events."""

from __future__ import annotations

from nereus import records as r
from nereus.machine.events import (
    Admitted,
    AttemptSettled,
    ClaimRevoked,
    ControlApplied,
    ObligationClosed,
    ObligationOpened,
    WorkScheduled,
)
from nereus.state import keys
from nereus.testing import MemoryShard
from tests.unit.builders import admission, cancel, outcome, schedule


def test_a_schedule_puts_its_work_on_the_timeline() -> None:
    """A SCHEDULE's one event is its timeline entry; its re-delivery has none."""
    shard = MemoryShard()
    events = shard.apply(schedule("m1", 5_000)).events
    assert events == [WorkScheduled(keys.timeline_key("local", 5_000, "m1"))]
    assert shard.apply(schedule("m1", 5_000)).events == []


def test_an_admission_opens_an_obligation_and_its_outcome_settles_it() -> None:
    """A winning admission: obligation opened, then Admitted; the outcome closes it."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000))
    adm = admission(shard, "m1", "a1")
    won = shard.apply(adm, broker_ms=1_000).events
    assert [type(e) for e in won] == [ObligationOpened, Admitted]
    opened = won[0]
    assert isinstance(opened, ObligationOpened) and opened.attempt_id == "a1"
    assert opened.obligation.lane == "local"
    done = shard.apply(outcome("m1", "a1", r.Outcome.PUBLISHED), broker_ms=1_100).events
    assert ObligationClosed("a1") in done and done[-1] == AttemptSettled("a1")


def test_a_refused_admission_revokes_its_claim() -> None:
    """An admission after the message was cancelled is STALE: ClaimRevoked with why."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    adm = admission(shard, "m1", "a1")
    shard.apply(cancel("m1"))
    (revoked,) = shard.apply(adm, broker_ms=1_000).events
    assert isinstance(revoked, ClaimRevoked) and revoked.admission == adm
    assert revoked.result.status == r.ResultStatus.STALE


def test_a_cancel_is_a_control_event_to_the_owner() -> None:
    """Any other applied record may change the owner's gate: it says so."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    assert shard.apply(cancel("m1")).events[-1] == ControlApplied()
