"""A Claim's admission, checked again at hand-over (``engine/scheduler/admission.py``), and
the same bytes on an enqueue retry (``engine/shard/outbox.py``)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.protocol import Receipt
from nereus.adapters.time_source import SYSTEM_CLOCK
from nereus.engine.runtime.event_log import null_event_log
from nereus.engine.scheduler.admission import handover_refusal, prepare_admission
from nereus.engine.scheduler.claims import Claim
from nereus.engine.shard.outbox import Outbox
from nereus.publish import PublishTemplate, template_digest
from nereus.records import MessageState, PublishAdmission, decode
from nereus.shard import ShardId
from nereus.state.values import Message
from nereus.trusted_time import TrustedTime
from tests.integration.doubles import DelegatingLog

NOW = TrustedTime(10_000, 10_010)
TEMPLATE = PublishTemplate(delay_message_id="m1", generation=1, lane="local",
                           deliver_at_ms=9_000, action_at_ms=9_000, key=None, headers={},
                           payload=b"x")
CLAIM = Claim(claim_id="c1", claim_sequence=7, owner_id="owner", store_id="db#1",
              fencing_epoch=3, deadline_mono_ms=60_000, delay_message_id="m1", lane="local",
              generation=1, work_digest="w1", timeline_key=b"t", revision=4,
              template=TEMPLATE, template_digest=template_digest(TEMPLATE), size_bytes=1)
ADMITTED_AT = 12
MESSAGE = Message(
    delay_message_id="m1", lane="local", state=MessageState.PUBLISHING, generation=1,
    deliver_at_ms=9_000, action_at_ms=9_000, expire_at_ms=None, key=None, headers={},
    payload=b"x", payload_ref=None, work_digest=None, retries=0, attempts=1,
    open_attempt_id="a1", schedule_command_id="s", created_position=4,
    updated_position=ADMITTED_AT)


def record(claim: Claim = CLAIM, **changes: object) -> PublishAdmission:
    admitted = decode(prepare_admission(claim, "a1", NOW).data)
    assert isinstance(admitted, PublishAdmission)
    return msgspec.structs.replace(admitted, **changes)


def refusal(rec: PublishAdmission, *, claim: Claim = CLAIM, store_id: str = "db#1",
            issued: int = 9, message: Message | None = MESSAGE) -> str | None:
    return handover_refusal(claim, rec, owner_id="owner", store_id=store_id, epoch=3,
                            issued_sequence=issued, message=message,
                            admitted_position=ADMITTED_AT)


def test_the_admission_of_the_live_claim_goes_to_its_publisher() -> None:
    """The admission prepared from the claim, won, the message unchanged since: no refusal."""
    assert refusal(record()) is None


@pytest.mark.parametrize(("case", "expected"), [
    ("another claim sequence", "claimSequence 8"),
    ("another claim id", "names claim c2"),
    ("a sequence never issued", "was never issued here"),
    ("another store", "made on store db#1, not the live db#2"),
    ("another owner's epoch", "live owner here is owner epoch 3"),
    ("another prepared template", "prepared template is not the claim's"),
    ("the message changed since", "changed after its admission was applied"),
    ("the message is gone", "changed after its admission was applied"),
])
def test_a_hand_over_that_does_not_match_the_live_claim_is_refused(case: str,
                                                                   expected: str) -> None:
    """Seed 000 section 2: claimSequence and store identity are checked at hand-over, with
    the claim's exact precondition and the message's runtime revision; each mismatch is
    refused, saying which."""
    rec, claim, store_id, issued = record(), CLAIM, "db#1", 9
    message: Message | None = MESSAGE
    if case == "another claim sequence":
        rec = record(claim_sequence=8)
    elif case == "another claim id":
        rec = record(claim_id="c2")
    elif case == "a sequence never issued":
        issued = 6
    elif case == "another store":
        store_id = "db#2"
    elif case == "another owner's epoch":
        claim = msgspec.structs.replace(CLAIM, fencing_epoch=2)
        rec = record(claim)
    elif case == "another prepared template":
        rec = record(prepared_digest="other")
    elif case == "the message changed since":
        message = msgspec.structs.replace(MESSAGE, updated_position=ADMITTED_AT + 1)
    else:
        message = None
    why = refusal(rec, claim=claim, store_id=store_id, issued=issued, message=message)
    assert why is not None and expected in why, why


class FailsOnce(DelegatingLog):
    """A Shard Log whose first append fails (a broker timeout); every append's bytes kept."""

    def __init__(self, inner: FileShardLog) -> None:
        super().__init__(inner)
        self.appends: list[list[bytes]] = []

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        self.appends.append(list(payloads))
        if len(self.appends) == 1:
            raise OSError("the append timed out")
        return self.inner.append(payloads)


def test_an_admission_enqueue_retry_sends_the_very_same_bytes(tmp_path: Path) -> None:
    """The prepared admission's bytes go to the log; a failed append is retried with the
    same bytes, so the attempt id is assigned once, whatever the log did."""
    log = FailsOnce(FileShardLog(tmp_path / "log"))
    outbox = Outbox(ShardId("default", 0), log, time=SYSTEM_CLOCK, events=null_event_log,
                    wake=threading.Event())
    prepared = prepare_admission(CLAIM, "a1", NOW)
    outbox.add_admissions([prepared])
    assert outbox.flush()
    assert log.appends == [[prepared.data], [prepared.data]]
    log.inner.close()
