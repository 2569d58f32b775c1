"""The Destination Protocol every adapter implements, and what it answers.

``publish`` is called only after the attempts' PUBLISH_ADMISSION is applied and synced,
and classifies every request by side-effect evidence (seed 000 §4): PUBLISHED only with
destination evidence; NOT_PUBLISHED only when the message provably never left; UNKNOWN
for everything ambiguous — never guess NOT_PUBLISHED. A failure that is the message's own
fault sets ``message_fault`` (the message fails, its lane stays READY); any other makes the
lane NOT READY until ``probe`` (None when ready, else the reason) passes.
``max_record_bytes`` is checked at Claim. ``close`` may be called more than once; a closed
destination sends nothing (NOT_PUBLISHED LANE_UNAVAILABLE; ``scan_evidence`` raises
``DestinationClosed``). ``tests/integration/destination_contract.py`` holds every adapter
to this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from nereus.errors import ExitCode, NereusError
from nereus.evidence_mac import ExpectedMac
from nereus.publish import PublishTemplate
from nereus.records import Disposition, Outcome


class DestinationClosed(NereusError):
    """A closed destination was asked to scan: the caller's bug (the engine closes its
    destinations only after the publishers and the evidence worker have stopped)."""

    exit_code = ExitCode.INTERNAL


@dataclass(frozen=True, slots=True)
class PublishRequest:
    attempt_id: str
    template: PublishTemplate
    # HMAC of (delay message id, generation, attempt id) under the route's key: written
    # into the record beside the attempt id, so only our records count as evidence
    mac: str = ""
    # the shard whose owner sends it (``ROUTE/PARTITION``): a fencing destination writes
    # it only under that shard's writer fence (``fencing.py``); "" for tools and tests
    shard: str = ""
    # its admission's Shard Log position: increasing per shard, above every earlier
    # owner's (a Pulsar lane's sequence id under deduplication); -1 for tools and tests
    sequence: int = -1


@dataclass(frozen=True, slots=True)
class PublishResult:
    attempt_id: str
    outcome: Outcome
    disposition: Disposition
    evidence: str
    published_at_ms: int | None = None
    message_fault: bool = False  # the message's own fault: its lane stays READY


RECORD_OVERHEAD_BYTES = 512  # the headers Nereus adds: delay message id and attempt id


def record_size(template: PublishTemplate) -> int:
    """What one message weighs at a destination: payload, key and headers (UTF-8), plus
    the headers Nereus adds."""
    headers = sum(len(k.encode()) + len(v.encode()) for k, v in template.headers.items())
    key = 0 if template.key is None else len(template.key.encode())
    return len(template.payload) + key + headers + RECORD_OVERHEAD_BYTES


class Destination(Protocol):
    name: str
    # the largest record this destination takes (None: no limit); checked at Claim
    max_record_bytes: int | None

    def publish(
        self, requests: Sequence[PublishRequest], now_ms: Callable[[], int]
    ) -> list[PublishResult]: ...

    def probe(self) -> str | None: ...

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        """Attempt ids with positive destination evidence in ``[since_ms, until_ms]``,
        mapped to the evidence. ``wanted`` maps each attempt id to the MAC its record must
        carry: a record with the attempt id but another MAC is not evidence. Absence
        proves nothing."""
        ...

    def close(self) -> None: ...
