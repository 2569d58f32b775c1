"""A shard's attempt ledger, read after a broker fault: every attempt, and the check that
each NOT_PUBLISHED outcome proves its record never left this process.

A lost answer (a timeout) is never such proof: it is UNKNOWN. So a NOT_PUBLISHED attempt
whose record is on the destination topic is a lie the ledger must never tell.
"""

from __future__ import annotations

import re

from nereus.records import AttemptState, Disposition, Outcome
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, decode_value

# the evidence of every NOT_PUBLISHED outcome that proves the record never left this
# process: declined by the shard loop or the lane publisher, refused before the producer
# took it, or declined by a stopping engine. A lost answer (a timeout) is never one of them.
NEVER_LEFT = re.compile(
    r"^(owner declined before any send: "
    r"|lane \S+ NOT READY \(.*\): never handed to the destination$"
    r"|kafka:\S+: nothing was sent: "
    r"|kafka:\S+: produce\(\) refused it: "
    r"|engine stopping: the request never reached the destination$)", re.DOTALL)


def attempts_of(store: ShardStore) -> list[Attempt]:
    return [decode_value(raw, Attempt) for _, raw in store.scan_prefix(keys.ATTEMPT)]


def check_not_published(attempts: list[Attempt], on_topic: set[str]) -> int:
    """Every NOT_PUBLISHED outcome (settling or late) says the record never left, with a
    disposition that keeps the message, and no such attempt's record is on the topic."""
    checked = 0
    for attempt in attempts:
        outcomes = [(attempt.disposition.value, attempt.evidence)] \
            if attempt.state == AttemptState.NOT_PUBLISHED else []
        outcomes += [(late.disposition, late.evidence) for late in attempt.late_outcomes
                     if late.outcome == Outcome.NOT_PUBLISHED]
        for disposition, evidence in outcomes:
            checked += 1
            assert disposition in (Disposition.LANE_UNAVAILABLE, Disposition.RETRIABLE), (
                f"{attempt.attempt_id}: NOT_PUBLISHED {disposition}: {evidence}")
            assert NEVER_LEFT.match(evidence), (
                f"{attempt.attempt_id}: NOT_PUBLISHED without proof it never left: {evidence}")
        if attempt.state == AttemptState.NOT_PUBLISHED:
            assert attempt.attempt_id not in on_topic, (
                f"{attempt.attempt_id} ({attempt.delay_message_id}) is NOT_PUBLISHED, yet its "
                f"record is on the destination topic: {attempt.evidence}")
    return checked
