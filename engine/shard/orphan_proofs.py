"""Recovery's proofs: orphans on a lane that fences its writers are classified exactly.

An orphan is an attempt still PUBLISHING when a new owner activates: the old owner died
(or was fenced) between its admission and its outcome. Without more, its side effect is
unknown (seed 000 §4). A destination that fences the old writer (``fencing.py``: a file
lane's per-shard writer lock) turns that into a proof: once the new owner holds the fence,
each orphan is either in the destination (PUBLISHED, with its record) or will never be
(NOT_PUBLISHED LANE_UNAVAILABLE, with the fence's evidence, its kind named first). The
outcome is the new owner's own, exact and current, so the state machine applies it as
any other outcome of a PUBLISHING attempt (0.1.0 applies it the same way).

Every lane that can fence is fenced at every recovery, orphans or not: the fence then
records what the outbox looked like for the next owner's proof. A lane whose fence fails
leaves its orphans UNKNOWN and says why (``orphans_unproven``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from nereus.adapters.backends.destination.fencing import Fenced, NotFenced
from nereus.evidence_mac import ExpectedMac
from nereus.records import Disposition, Outcome
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, decode_value

WINDOW_BEFORE_MS = 60_000  # read before the earliest orphan's admission (clocks differ)


class Fences(Protocol):
    """A lane's fence as recovery calls it (``DeadlineFences``)."""

    @property
    def can_fence(self) -> bool: ...

    def fence(self, shard: str, wanted: Mapping[str, ExpectedMac], since_ms: int) -> Fenced: ...


# (delay message id, generation, attempt id) -> the MAC(s) its record may carry
Mac = Callable[[str, int, str], ExpectedMac]


@dataclass(frozen=True, slots=True)
class Proven:
    """An orphan's exact outcome."""

    outcome: Outcome
    disposition: Disposition
    evidence: str


@dataclass
class Proofs:
    """What recovery's fences proved: outcomes by attempt id; why a lane proved nothing."""

    proven: dict[str, Proven] = field(default_factory=dict)
    unproven: dict[str, str] = field(default_factory=dict)  # lane -> why (it had orphans)
    not_fenced: dict[str, str] = field(default_factory=dict)  # lane -> why (none to prove)


def prove_orphans(store: ShardStore, shard: ShardId, orphans: list[str],
                  fences: Mapping[str, Fences], mac: Mac) -> Proofs:
    """Fence every lane that can, and classify the ``orphans`` (attempt ids) on it."""
    by_lane: dict[str, list[Attempt]] = {lane: [] for lane, f in fences.items() if f.can_fence}
    for attempt_id in orphans:
        raw = store.get(keys.attempt_key(attempt_id))
        if raw is not None:
            attempt = decode_value(raw, Attempt)
            if attempt.lane in by_lane:
                by_lane[attempt.lane].append(attempt)
    proofs = Proofs()
    for lane, attempts in by_lane.items():
        wanted = {a.attempt_id: mac(a.delay_message_id, a.generation, a.attempt_id)
                  for a in attempts}
        since = min((a.admitted_broker_ms for a in attempts), default=0) - WINDOW_BEFORE_MS
        try:
            fenced = fences[lane].fence(str(shard), wanted, since)
        except NotFenced as exc:
            (proofs.unproven if attempts else proofs.not_fenced)[lane] = str(exc)
            continue
        for attempt_id in wanted:
            found = fenced.found.get(attempt_id)
            proofs.proven[attempt_id] = (
                Proven(Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE, fenced.absent)
                if found is None else
                Proven(Outcome.PUBLISHED, Disposition.NONE, f"{found}; under the writer fence"))
    return proofs
