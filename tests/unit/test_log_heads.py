"""A report's read of its shards' log ends (``engine status``, the feed, a Prometheus
scrape) is bounded: a log that does not answer is reported as such within the wait, asked
once however many reports wait on it, and its answer is used as soon as it comes."""

from __future__ import annotations

import re
import threading
import time

from nereus.engine.process.log_heads import LogHeads
from nereus.shard import ShardId

A, B = ShardId("default", 0), ShardId("default", 1)
WAIT_S = 0.05


class HeldLog:
    """A log whose end position answers only once ``release`` is set (a broker that is
    down), counting how often it is asked."""

    def __init__(self, end: int, *, held: bool = True) -> None:
        self.end = end
        self.asked = 0
        self.release = threading.Event()
        if not held:
            self.release.set()

    def end_position(self) -> int:
        self.asked += 1
        if not self.release.wait(30):
            raise TimeoutError("never released")
        return self.end


class BrokenLog:
    def __init__(self) -> None:
        self.asked = 0

    def end_position(self) -> int:
        self.asked += 1
        raise OSError("segment 3 is unreadable")


def _heads() -> LogHeads:
    return LogHeads(wait_s=WAIT_S, monotonic=time.monotonic)


def test_an_answering_log_gives_its_end() -> None:
    """A log that answers at once is reported with its end and no error."""
    heads = _heads()
    log = HeldLog(41, held=False)
    assert heads.read([(A, log)])[A].end == 41
    assert heads.read([(A, log)])[A].error is None


def test_a_log_that_does_not_answer_is_reported_and_asked_once() -> None:
    """A held log is reported without an end and with why, by every report until it
    answers; it is asked once meanwhile, and its answer is used as soon as it comes."""
    heads = _heads()
    log = HeldLog(7)
    for _ in range(3):
        head = heads.read([(A, log)])[A]
        assert head.end is None
        assert head.error == f"the log did not answer within {WAIT_S:g} s (still asking)"
    assert log.asked == 1
    log.release.set()
    answered = None
    while answered is None:  # the question in flight ends; a later read takes its answer
        answered = heads.read([(A, log)])[A].end
    assert answered == 7


def test_a_held_log_does_not_hold_the_others() -> None:
    """Every shard's log is asked at once: a held one costs the report one wait, and the
    others are answered in the same report."""
    heads = _heads()
    held, other = HeldLog(5), HeldLog(9, held=False)
    got = heads.read([(A, held), (B, other)])
    assert (got[A].end, got[B].end) == (None, 9)
    held.release.set()


def test_a_log_that_stops_answering_says_when_it_last_did() -> None:
    """After an answer, a log that stops answering is reported with its last end."""
    heads = _heads()
    log = HeldLog(12, held=False)
    assert heads.read([(A, log)])[A].end == 12
    log.release.clear()
    head = heads.read([(A, log)])[A]
    assert head.end is None and head.error is not None
    assert re.search(r"; its end was 12 \d+ s ago$", head.error), head.error
    log.release.set()


def test_a_failing_log_is_reported_with_its_error_and_asked_again() -> None:
    """A log that raises is reported with the exception, and the next report asks again."""
    heads = _heads()
    log = BrokenLog()
    assert heads.read([(A, log)])[A].error == "OSError: segment 3 is unreadable"
    assert heads.read([(A, log)])[A].error == "OSError: segment 3 is unreadable"
    assert log.asked == 2


def test_a_reopened_log_is_asked_afresh() -> None:
    """A shard whose log was reopened (a move back) is asked on its new log, even while a
    question to the old one is still in flight."""
    heads = _heads()
    old, new = HeldLog(3), HeldLog(4, held=False)
    assert heads.read([(A, old)])[A].end is None
    assert heads.read([(A, new)])[A].end == 4
    old.release.set()
