"""The client's retry policy: how often, how far apart and for how long an append that
failed is sent again. A retry always sends the prepared command's own bytes (same command
id): the shard applies it once however many copies reach the log.

Pure: the delays are computed here, the waiting is the caller's (its clock).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """``attempts`` sends at most (1: no retry), the first retry after ``initial_backoff_s``,
    each next one ``multiplier`` times later, capped at ``max_backoff_s``; no new send
    starts once ``deadline_s`` has passed since the first."""

    attempts: int = 5
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    multiplier: float = 2.0
    deadline_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1")
        if min(self.initial_backoff_s, self.max_backoff_s, self.deadline_s) < 0:
            raise ValueError("RetryPolicy times cannot be negative")
        if self.multiplier < 1:
            raise ValueError("RetryPolicy.multiplier must be at least 1")

    def backoffs(self) -> Iterator[float]:
        """The pause before each retry, in seconds (``attempts - 1`` of them)."""
        pause = self.initial_backoff_s
        for _ in range(self.attempts - 1):
            yield min(pause, self.max_backoff_s)
            pause *= self.multiplier


NO_RETRY = RetryPolicy(attempts=1)
