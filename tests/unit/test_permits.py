"""Reserved lane shares of the worker and byte pools (``engine/scheduler/permits.py``)."""

from __future__ import annotations

from nereus.engine.scheduler.permits import PermitLimits, Permits, Reserve, reserves


def fill(permits: Permits, lane: str, size: int = 0) -> int:
    """Take permits for ``lane`` until refused; how many it got."""
    taken = 0
    while permits.try_acquire(lane, size):
        taken += 1
    return taken


def test_half_of_each_pool_is_reserved_evenly_and_the_rest_shared() -> None:
    """40 permits and 4 lanes: 5 reserved for each, 20 shared; a lane's reserve is capped
    by lane_in_flight, and with more lanes than permits nothing can be reserved."""
    limits = PermitLimits(worker=40, lane=20, bytes=8_000)
    assert reserves(limits, ["a", "b", "c", "d"]) == dict.fromkeys("abcd", Reserve(5, 1_000))
    assert reserves(PermitLimits(worker=40, lane=3, bytes=8), ["a", "b"])["a"].permits == 3
    assert reserves(PermitLimits(worker=4, lane=4, bytes=8), "abc")["a"].permits == 1
    assert reserves(PermitLimits(worker=2, lane=2, bytes=8), "abc")["a"].permits == 0
    permits = Permits(limits, lanes=["a", "b", "c", "d"])
    assert (permits.shared_permits, permits.shared_bytes) == (20, 4_000)


def test_lanes_that_hold_everything_they_can_leave_each_other_lane_its_reserve() -> None:
    """Three lanes that never give a permit back (their destinations hang) take their own
    5 and the 20 shared; the fourth still gets its 5 reserved permits, one after another,
    and no more; the hung lanes can take none of them."""
    permits = Permits(PermitLimits(worker=40, lane=20, bytes=1 << 20),
                      lanes=["hung1", "hung2", "hung3", "healthy"])
    held = [fill(permits, name) for name in ("hung1", "hung2", "hung3")]
    assert sum(held) == 35 and max(held) <= 20
    assert fill(permits, "healthy") == 5
    assert "shared permits are taken" in (permits.refusal("healthy", 0) or "")
    permits.release("healthy", 0)
    assert not permits.try_acquire("hung1", 0), "a hung lane took a healthy lane's reserve"
    assert permits.try_acquire("healthy", 0)


def test_the_hung_lanes_permits_given_back_stop_counting_against_the_others() -> None:
    """Once a hung lane's claims end (its stuck attempts answered), what it held beyond its
    reserve is shared again: another lane can grow into it."""
    permits = Permits(PermitLimits(worker=20, lane=20, bytes=1 << 20), lanes=["hung", "ok"])
    taken = fill(permits, "hung")
    assert taken == 15  # its 5 and the 10 shared
    assert fill(permits, "ok") == 5
    for _ in range(taken):
        permits.release("hung", 0)
    assert permits.shared_permits_used == 0
    assert fill(permits, "ok") == 10


def test_bytes_beyond_a_lanes_reserve_come_from_the_shared_part_only() -> None:
    """1,000 bytes and two lanes (250 reserved each, 500 shared): a lane that filled the
    shared part is refused more, the other still takes its 250; a message larger than
    its reserve and the shared part together waits until its lane has nothing in flight
    and the shared part is unused, then goes alone."""
    permits = Permits(PermitLimits(worker=100, lane=100, bytes=1_000), lanes=["a", "b"])
    assert fill(permits, "a", 150) == 5  # 750 = its 250 and the 500 shared
    assert "shared are in flight" in (permits.refusal("a", 1) or "")
    assert fill(permits, "b", 125) == 2
    big = 2_000
    assert not permits.try_acquire("b", big)
    for _ in range(2):
        permits.release("b", 125)
    assert not permits.try_acquire("b", big), "the shared part is still in use by a"
    for _ in range(5):
        permits.release("a", 150)
    assert permits.try_acquire("b", big)
    assert permits.try_acquire("a", 250), "a's reserve is a's, whatever b holds"
    assert not permits.try_acquire("a", 1)


def test_a_lane_added_later_gets_a_reserve_and_what_is_held_is_charged_again() -> None:
    """Two lanes, then a third: the reserves shrink from 5 to 3 and what the first lane
    already held beyond its new reserve counts against the shared part."""
    permits = Permits(PermitLimits(worker=20, lane=20, bytes=1 << 20), lanes=["a", "b"])
    assert fill(permits, "a") == 15
    permits.configure(["a", "b", "c"])
    assert permits.reserve("c") == Reserve(3, (1 << 20) // 6)
    assert permits.shared_permits == 11 and permits.shared_permits_used == 12
    assert fill(permits, "c") == 3 and fill(permits, "b") == 3


def test_without_configured_lanes_the_pool_is_shared_as_before() -> None:
    """No lanes named: every permit is shared; the per-lane cap and the byte budget hold,
    and a message larger than the budget goes only when nothing is in flight."""
    permits = Permits(PermitLimits(worker=3, lane=2, bytes=100))
    assert fill(permits, "x", 10) == 2 and fill(permits, "y", 10) == 1
    assert permits.refusal("z", 0) is not None
    empty = Permits(PermitLimits(worker=3, lane=2, bytes=100))
    assert empty.try_acquire("x", 500) and not empty.try_acquire("y", 1)
