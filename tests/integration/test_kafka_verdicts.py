"""The Kafka destination's verdicts, on librdkafka's own ``KafkaError`` codes (no broker
needed): only a delivery report proving the broker refused the batch is NOT_PUBLISHED, a
record ``produce()`` refused never entered the client, and ``docs/outcomes.md``'s table says
what the classifier does, so the two cannot drift apart. Importing the modules loads no
client. The destination against a real broker is ``test_kafka_destination.py``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from nereus.adapters.backends.kafka.kafka_verdicts import (
    BATCH_REFUSALS,
    classify_delivery_error,
    classify_produce_error,
)
from nereus.records import Disposition, Outcome

ROOT = Path(__file__).resolve().parents[2]
OUTCOMES_MD = ROOT / "docs" / "outcomes.md"

P, N, U = Outcome.PUBLISHED, Outcome.NOT_PUBLISHED, Outcome.UNKNOWN


def code(name: str) -> KafkaError:
    """librdkafka's KafkaError for a code name (``_MSG_TIMED_OUT``, ``MSG_SIZE_TOO_LARGE``)."""
    return KafkaError(getattr(KafkaError, name))


def every_kafka_error() -> list[KafkaError]:
    """Every error code librdkafka defines (the KafkaError class's integer constants)."""
    codes = {value for name, value in vars(KafkaError).items()
             if name.isupper() or (name.startswith("_") and name[1:].isupper())
             if isinstance(value, int)}
    return [KafkaError(c) for c in sorted(codes)]


# the classifier, on librdkafka's codes --------------------------------------------------
@pytest.mark.parametrize(("name", "create_topic", "expected"), [
    ("MSG_SIZE_TOO_LARGE", True, (N, Disposition.PERMANENT)),
    ("RECORD_LIST_TOO_LARGE", True, (N, Disposition.PERMANENT)),
    ("INVALID_RECORD", True, (N, Disposition.PERMANENT)),
    ("TOPIC_AUTHORIZATION_FAILED", True, (N, Disposition.PERMANENT)),
    ("CLUSTER_AUTHORIZATION_FAILED", False, (N, Disposition.PERMANENT)),
    ("_UNKNOWN_TOPIC", False, (N, Disposition.PERMANENT)),
    ("UNKNOWN_TOPIC_OR_PART", False, (N, Disposition.PERMANENT)),
    ("_UNKNOWN_TOPIC", True, (N, Disposition.LANE_UNAVAILABLE)),
    ("UNKNOWN_TOPIC_OR_PART", True, (N, Disposition.LANE_UNAVAILABLE)),
    ("_MSG_TIMED_OUT", True, (U, Disposition.NONE)),
    ("_TRANSPORT", True, (U, Disposition.NONE)),
    ("REQUEST_TIMED_OUT", False, (U, Disposition.NONE)),
    ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, (U, Disposition.NONE)),
    ("NOT_ENOUGH_REPLICAS", True, (U, Disposition.NONE)),
    ("NOT_LEADER_FOR_PARTITION", True, (U, Disposition.NONE)),
    ("OUT_OF_ORDER_SEQUENCE_NUMBER", True, (U, Disposition.NONE)),
    ("_FATAL", True, (U, Disposition.NONE)),
    ("_UNKNOWN_PARTITION", False, (U, Disposition.NONE)),
    ("_DESTROY", False, (U, Disposition.NONE)),
    ("_PURGE_INFLIGHT", True, (U, Disposition.NONE)),
    ("UNKNOWN", True, (U, Disposition.NONE)),
])
def test_delivery_report_errors_are_classified_by_what_they_prove(
    name: str, create_topic: bool, expected: tuple[Outcome, Disposition]
) -> None:
    """Only errors proving the broker refused the batch are NOT_PUBLISHED; the rest UNKNOWN."""
    verdict = classify_delivery_error(code(name), create_topic=create_topic)
    assert (verdict.outcome, verdict.disposition) == expected
    assert verdict.why
    assert classify_delivery_error(name, create_topic=create_topic) == verdict


def test_a_delivery_report_without_error_is_published() -> None:
    """No error in the report: PUBLISHED, no disposition."""
    verdict = classify_delivery_error(None, create_topic=True)
    assert (verdict.outcome, verdict.disposition) == (P, Disposition.NONE)


def test_no_librdkafka_error_outside_the_refusal_list_is_ever_not_published() -> None:
    """Of every code librdkafka defines, exactly the listed refusals are NOT_PUBLISHED in a
    delivery report; an unlisted (or future) code is UNKNOWN, never a guessed absence."""
    refusals = {"MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD",
                "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_UNKNOWN_TOPIC",
                "UNKNOWN_TOPIC_OR_PART"}
    errors = every_kafka_error()
    assert len(errors) > 100
    for create_topic in (True, False):
        absent = {e.name() for e in errors
                  if classify_delivery_error(e, create_topic=create_topic).outcome != U}
        assert absent == refusals
    assert classify_delivery_error(KafkaError(31_337), create_topic=True).outcome == U
    assert refusals >= BATCH_REFUSALS


@pytest.mark.parametrize(("name", "create_topic", "disposition"), [
    ("_QUEUE_FULL", True, Disposition.RETRIABLE),
    ("MSG_SIZE_TOO_LARGE", True, Disposition.PERMANENT),
    ("_INVALID_ARG", True, Disposition.PERMANENT),
    ("_UNKNOWN_TOPIC", False, Disposition.PERMANENT),
    ("_UNKNOWN_TOPIC", True, Disposition.LANE_UNAVAILABLE),
    ("_UNKNOWN_PARTITION", False, Disposition.PERMANENT),
    ("_FATAL", True, Disposition.LANE_UNAVAILABLE),
    ("_MSG_TIMED_OUT", True, Disposition.RETRIABLE),
])
def test_errors_raised_by_produce_are_not_published(
    name: str, create_topic: bool, disposition: Disposition
) -> None:
    """A record produce() refused never entered the client: NOT_PUBLISHED, whatever the code."""
    verdict = classify_produce_error(code(name), create_topic=create_topic)
    assert (verdict.outcome, verdict.disposition) == (N, disposition)


def test_only_the_records_own_refusals_are_message_faults() -> None:
    """Size and validity refusals fail the message alone (message_fault: the lane stays
    READY); authorization and missing topics are the lane's problem."""
    for name in ("MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD"):
        assert classify_delivery_error(code(name), create_topic=True).message_fault, name
    for name in ("MSG_SIZE_TOO_LARGE", "_INVALID_ARG", "_INVALID_TYPE"):
        assert classify_produce_error(code(name), create_topic=True).message_fault, name
    for name in ("TOPIC_AUTHORIZATION_FAILED", "_UNKNOWN_TOPIC", "_MSG_TIMED_OUT"):
        assert not classify_delivery_error(code(name), create_topic=False).message_fault, name
    assert not classify_produce_error(code("_QUEUE_FULL"), create_topic=True).message_fault


def _kafka_table_rows() -> list[tuple[list[str], str, str, str]]:
    """(error names, where, outcome, disposition) of docs/outcomes.md's Kafka error tables."""
    text = OUTCOMES_MD.read_text()
    section = text.split("\n## Kafka", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[1] not in ("produce()", "delivery report"):
            continue
        names = re.findall(r"`([A-Z_]+)`", cells[0])
        if names:
            rows.append((names, cells[1], cells[2], cells[3]))
    return rows


def test_docs_outcomes_table_matches_the_classifier() -> None:
    """Every error row of the Kafka table in docs/outcomes.md says what the code does."""
    rows = _kafka_table_rows()
    assert len(rows) >= 25
    for names, where, outcome, disposition in rows:
        for name in names:
            for create_topic in (False, True):
                if " if create_topic=false, else " in disposition:
                    off, on = disposition.split(" if create_topic=false, else ")
                    expected = on if create_topic else off
                else:
                    expected = disposition
                classify = (classify_produce_error if where == "produce()"
                            else classify_delivery_error)
                verdict = classify(name, create_topic=create_topic)
                assert (verdict.outcome.value, verdict.disposition.value) == (
                    outcome, expected), f"{name} ({where}, create_topic={create_topic})"


def test_importing_the_kafka_modules_does_not_load_librdkafka() -> None:
    """The CLI imports these modules lazily at most; even importing them loads no client."""
    code_ = ("import sys, nereus.adapters.backends.kafka.kafka_destination, "
             "nereus.adapters.backends.kafka.kafka_log; "
             "assert 'confluent_kafka' not in sys.modules, sorted(sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code_], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
