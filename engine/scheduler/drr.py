"""Two-level bounded deficit round robin across lanes, with persisted rotation state.

Level 1 rotates the lane that starts each round and lets a lane claim up to ``quantum`` plus
its carried deficit (bounded by ``max_deficit``; reset when idle); a CLOSED, NOT READY,
full or permit-less lane is skipped at once, so a healthy lane never waits behind it.
Level 2 keeps a discovery cursor per lane, the timeline key after its last claim, so a hot
early lane's next scan resumes there; it resets at the due bound. Both levels' state is
local, under ``sched/state``, outside the digest.
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
