"""A Claim's Publish Admission: prepared by the admission executor, checked at hand-over
(seed 000 §2-§3).

A Claim assigns no attempt identity. The admission executor (``AdmissionFlow.schedule``)
prepares each new claim's complete PUBLISH_ADMISSION once (``prepare_admission``): a new
attempt id, the claim's exact precondition, the template's digest and the Trusted UTC
decision; an enqueue retry resends those very bytes, so one admission never gets a second
attempt id. Once it has won and its batch is synced, ``handover_refusal`` checks the claim
again before any producer call: this very claim (id and claimSequence), the live owner,
store and epoch, and the message's runtime revision equal to the admission's own position.
Anything else is declined, never sent.
"""

from __future__ import annotations

import msgspec

from nereus.engine.scheduler.claims import Claim
from nereus.records import PublishAdmission, encode
from nereus.state.values import Message
from nereus.trusted_time import TrustedTime


class PreparedAdmission(msgspec.Struct, frozen=True, kw_only=True):
    """A claim's PUBLISH_ADMISSION as the executor prepared it."""

    attempt_id: str
    claim: Claim
    data: bytes  # the exact record bytes; an enqueue retry resends these


def prepare_admission(claim: Claim, attempt_id: str, now: TrustedTime) -> PreparedAdmission:
    """The complete, deterministic PUBLISH_ADMISSION of ``claim`` under ``attempt_id``,
    decided at Trusted UTC ``now``."""
    record = PublishAdmission(
        attempt_id=attempt_id, delay_message_id=claim.delay_message_id,
        generation=claim.generation, work_digest=claim.work_digest, lane=claim.lane,
        claim_id=claim.claim_id, claim_sequence=claim.claim_sequence,
        owner_id=claim.owner_id, fencing_epoch=claim.fencing_epoch,
        prepared_digest=claim.template_digest,
        decided_earliest_ms=now.earliest_ms, decided_latest_ms=now.latest_ms,
    )
    return PreparedAdmission(attempt_id=attempt_id, claim=claim, data=encode(record))


def handover_refusal(claim: Claim, record: PublishAdmission, *, owner_id: str, store_id: str,
                     epoch: int, issued_sequence: int, message: Message | None,
                     admitted_position: int) -> str | None:
    """Why the won admission ``record`` may not go to a publisher for ``claim`` (module
    docstring), or None. ``issued_sequence``: the last claimSequence this owner issued;
    ``message``: the message as the applied state has it now; ``admitted_position``: where
    the admission was applied."""
    if (record.claim_id, record.claim_sequence) != (claim.claim_id, claim.claim_sequence):
        return (f"the admission names claim {record.claim_id} (claimSequence "
                f"{record.claim_sequence}), not the live claim {claim.claim_id} "
                f"(claimSequence {claim.claim_sequence})")
    if not 0 < claim.claim_sequence <= issued_sequence:
        return (f"claimSequence {claim.claim_sequence} was never issued here (the last is "
                f"{issued_sequence})")
    if (record.owner_id, record.fencing_epoch) != (claim.owner_id, claim.fencing_epoch) \
            or (claim.owner_id, claim.fencing_epoch) != (owner_id, epoch):
        return (f"the claim is owner {claim.owner_id} epoch {claim.fencing_epoch}'s; the "
                f"live owner here is {owner_id} epoch {epoch}")
    if claim.store_id != store_id:
        return f"the claim was made on store {claim.store_id}, not the live {store_id}"
    if (record.generation, record.work_digest, record.prepared_digest) != (
            claim.generation, claim.work_digest, claim.template_digest):
        return "the admission's work or prepared template is not the claim's"
    if message is None or message.open_attempt_id != record.attempt_id \
            or message.updated_position != admitted_position:
        return ("the message changed after its admission was applied (runtime revision "
                f"{None if message is None else message.updated_position}, admitted at "
                f"{admitted_position})")
    return None
