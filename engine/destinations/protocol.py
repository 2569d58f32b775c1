"""The Destination Protocol every adapter implements, and what it answers.

``publish`` is called only after the attempts' PUBLISH_ADMISSION is applied and synced.
It must classify every request by side-effect evidence (seed 000, section 4):

* PUBLISHED only with destination evidence (file offset, partition+offset, MessageId);
* NOT_PUBLISHED only when the message provably never left (RETRIABLE, PERMANENT or
  LANE_UNAVAILABLE);
* UNKNOWN for everything ambiguous (a write or sync that failed after bytes may have
  landed, a timeout after send). Never guess NOT_PUBLISHED.

``probe`` reports readiness: None when the destination can take work, else the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from nereus.publish import PublishTemplate
from nereus.records import Disposition, Outcome


@dataclass(frozen=True, slots=True)
class PublishRequest:
    attempt_id: str
    template: PublishTemplate


@dataclass(frozen=True, slots=True)
class PublishResult:
    attempt_id: str
    outcome: Outcome
    disposition: Disposition
    evidence: str
    published_at_ms: int | None = None


class Destination(Protocol):
    name: str

    def publish(
        self, requests: Sequence[PublishRequest], now_ms: Callable[[], int]
    ) -> list[PublishResult]: ...

    def probe(self) -> str | None: ...

    def scan_evidence(self, attempt_ids: set[str], since_ms: int, until_ms: int) -> dict[str, str]:
        """Attempt ids with positive destination evidence (by the attempt-id header) in
        ``[since_ms, until_ms]``, mapped to the evidence. Absence proves nothing."""
        ...

    def close(self) -> None: ...
