"""Two-level bounded deficit round robin across lanes, with persisted rotation state.

Level 1 (service) rotates over lanes: each round starts one lane further on, and a lane
may claim up to ``quantum`` plus its carried deficit; a lane that had due work left over
keeps the unused deficit (bounded by ``max_deficit``), an idle lane's deficit resets. A
lane that is CLOSED, NOT READY, at capacity or out of permits is skipped at once, so a
healthy lane never waits behind an unhealthy one.

Level 2 (discovery) keeps a cursor per lane: the timeline key after the last entry it
claimed. The next round's scan of that lane resumes there instead of restarting at the
head, so a hot early lane cannot make every scan start from the beginning. When a scan
reaches the due bound, the cursor resets to the head.

Both levels' state (next lane, deficits, cursors, the claim sequence) is local runtime
state persisted under ``sched/state``; it is excluded from the state digest.
"""

from __future__ import annotations

import msgspec

from nereus.state import keys

STATE_KEY = keys.SCHED + b"state"


class DrrState(msgspec.Struct, kw_only=True):
    next_lane: int = 0
    deficits: dict[str, int] = msgspec.field(default_factory=dict)
    cursors: dict[str, bytes] = msgspec.field(default_factory=dict)
    claim_sequence: int = 0


def load_state(raw: bytes | None) -> DrrState:
    if raw is None:
        return DrrState()
    try:
        return msgspec.msgpack.decode(raw, type=DrrState)
    except msgspec.DecodeError:
        return DrrState()  # local state: a damaged copy is discarded, never trusted


def dump_state(state: DrrState) -> bytes:
    return msgspec.msgpack.encode(state)


class LaneRotation:
    def __init__(self, state: DrrState, *, quantum: int, max_deficit: int) -> None:
        self.state = state
        self.quantum = quantum
        self.max_deficit = max_deficit

    def order(self, lanes: list[str]) -> list[str]:
        """This round's lane order; the next round starts one lane later."""
        if not lanes:
            return []
        start = self.state.next_lane % len(lanes)
        self.state.next_lane = (start + 1) % len(lanes)
        return lanes[start:] + lanes[:start]

    def budget(self, lane: str) -> int:
        return self.quantum + self.state.deficits.get(lane, 0)

    def settle(self, lane: str, budget: int, used: int, backlogged: bool) -> None:
        if backlogged:
            self.state.deficits[lane] = min(budget - used, self.max_deficit)
        else:
            self.state.deficits.pop(lane, None)
