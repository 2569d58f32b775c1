"""The Pulsar destination's verdicts (the table in ``docs/outcomes-pulsar.md``), no broker
needed: each send result maps to one outcome, whether it comes as an exception, a
``pulsar.Result`` or a bare name, and a producer that cannot be opened sent nothing. The
destination against a real broker is ``test_pulsar_destination.py``.
"""

from __future__ import annotations

import pytest

from nereus.adapters.backends.pulsar.pulsar_destination import classify_open_failure, classify_send
from nereus.records import Disposition, Outcome


def _pulsar_error(name: str) -> Exception:
    import pulsar

    error: Exception = getattr(pulsar.exceptions, name)(f"simulated {name}")
    return error


@pytest.mark.parametrize(("name", "before_send", "expected"), [
    ("Ok", False, (Outcome.PUBLISHED, Disposition.NONE)),
    ("ProducerQueueIsFull", True, (Outcome.NOT_PUBLISHED, Disposition.RETRIABLE)),
    ("MemoryBufferIsFull", True, (Outcome.NOT_PUBLISHED, Disposition.RETRIABLE)),
    ("MessageTooBig", True, (Outcome.NOT_PUBLISHED, Disposition.PERMANENT)),
    ("InvalidMessage", True, (Outcome.NOT_PUBLISHED, Disposition.PERMANENT)),
    ("AlreadyClosed", True, (Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE)),
    ("NotConnected", True, (Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE)),
    ("ProducerFenced", True, (Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE)),
    # after the message was enqueued nothing but Ok is evidence either way
    ("Timeout", False, (Outcome.UNKNOWN, Disposition.NONE)),
    ("ConnectError", False, (Outcome.UNKNOWN, Disposition.NONE)),
    ("AlreadyClosed", False, (Outcome.UNKNOWN, Disposition.NONE)),
    ("NotConnected", False, (Outcome.UNKNOWN, Disposition.NONE)),
    ("ProducerQueueIsFull", False, (Outcome.UNKNOWN, Disposition.NONE)),
    ("MessageTooBig", False, (Outcome.UNKNOWN, Disposition.NONE)),
    ("TopicTerminated", False, (Outcome.UNKNOWN, Disposition.NONE)),
    ("ProducerBlockedQuotaExceededException", False, (Outcome.UNKNOWN, Disposition.NONE)),
    ("UnknownError", False, (Outcome.UNKNOWN, Disposition.NONE)),
    # a result never given before sending is not trusted as "unsent" either
    ("Timeout", True, (Outcome.UNKNOWN, Disposition.NONE)),
    ("UnknownError", True, (Outcome.UNKNOWN, Disposition.NONE)),
])
def test_send_classification(
    name: str, before_send: bool, expected: tuple[Outcome, Disposition]
) -> None:
    """Each send result maps to one outcome: the exception type, the ``pulsar.Result`` and
    the bare name all classify the same."""
    import pulsar

    result = getattr(pulsar.Result, name)
    assert classify_send(result, before_send=before_send) == expected
    assert classify_send(name, before_send=before_send) == expected
    if name != "Ok":
        assert classify_send(_pulsar_error(name), before_send=before_send) == expected


@pytest.mark.parametrize(("name", "expected"), [
    ("TopicNotFound", Disposition.PERMANENT),
    ("InvalidTopicName", Disposition.PERMANENT),
    ("AuthorizationError", Disposition.PERMANENT),
    ("ProducerBlockedQuotaExceededError", Disposition.RETRIABLE),
    ("ProducerBlockedQuotaExceededException", Disposition.RETRIABLE),
    ("Timeout", Disposition.LANE_UNAVAILABLE),
    ("ConnectError", Disposition.LANE_UNAVAILABLE),
    ("LookupError", Disposition.LANE_UNAVAILABLE),
    ("AuthenticationError", Disposition.LANE_UNAVAILABLE),
    ("ServiceUnitNotReady", Disposition.LANE_UNAVAILABLE),
])
def test_open_failure_classification(name: str, expected: Disposition) -> None:
    """A producer that cannot be opened sent nothing: the batch is NOT_PUBLISHED with the
    disposition its error names (the lane's problem unless it is the topic's or quota)."""
    assert classify_open_failure(_pulsar_error(name)) == expected
    assert classify_open_failure(name) == expected
