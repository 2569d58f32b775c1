"""A due checkpoint of any shard of a process waits until the process's last one took at
most ``[checkpoints] max_share`` of the time since it began
(``engine.checkpoint_pacing.Pacing``)."""

from __future__ import annotations

from concurrent.futures import Future

from nereus.engine.shard.checkpoint_pacing import Pacing


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_checkpoint_of_two_seconds_at_a_tenth_spaces_the_next_twenty() -> None:
    """Ready at first; not while one is uploading; after one of 2 s at max_share 0.1, not
    until 20 s after it began, then ready."""
    clock = Clock()
    pacing = Pacing(0.1, clock)
    assert pacing.ready()
    assert pacing.claim()
    clock.now += 2.0
    assert not pacing.ready()  # still uploading
    pacing.ended()
    clock.now = 100.0 + 19.9
    assert not pacing.ready()
    clock.now = 100.0 + 20.0
    assert pacing.ready()


def test_a_share_of_one_waits_only_for_the_upload() -> None:
    """max_share = 1: the next is ready as soon as the last ended (the former behaviour)."""
    clock = Clock()
    pacing = Pacing(1.0, clock)
    assert pacing.claim()
    clock.now += 30.0
    assert not pacing.ready()
    pacing.ended()
    assert pacing.ready()


def test_a_failed_checkpoint_paces_like_one_that_succeeded() -> None:
    """The Future's callback ends the pacing whether the checkpoint was catalogued or
    failed: a failing upload is not retried back to back."""
    clock = Clock()
    pacing = Pacing(0.5, clock)
    uploading: Future[object] = Future()
    uploading.add_done_callback(pacing.ended)
    assert pacing.claim()
    clock.now += 4.0
    uploading.set_exception(OSError("disk full"))
    assert not pacing.ready()
    clock.now = 100.0 + 8.0
    assert pacing.ready()


def test_one_due_checkpoint_at_a_time_is_claimed() -> None:
    """While one loop's due checkpoint is in flight, another loop's claim fails; after it
    ended and its pause is over, one of them claims the next."""
    clock = Clock()
    pacing = Pacing(0.5, clock)
    assert pacing.claim()
    assert not pacing.claim()
    clock.now += 1.0
    pacing.ended()
    assert not pacing.claim()  # paused until 102.0
    clock.now = 102.0
    assert pacing.claim()
    assert not pacing.claim()
