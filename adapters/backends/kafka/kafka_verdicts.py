"""How the Kafka destination classifies a record's fate (``docs/outcomes.md``, section
Kafka, is the same table in prose; a test holds the two together).

A delivery report without error is PUBLISHED; a record refused in ``produce()`` was never
handed over: NOT_PUBLISHED (RETRIABLE for a full queue, PERMANENT for size or invalid
arguments); a report error proving the broker refused the batch before appending is
NOT_PUBLISHED, but a broker refuses whole batches (``BATCH_REFUSALS``), so only the answer
for a record sent alone decides; everything else is UNKNOWN, never guessed otherwise.
Error names are librdkafka's; ``confluent_kafka`` is only named for the type checker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from nereus.records import Disposition, Outcome

if TYPE_CHECKING:
    from confluent_kafka import KafkaError


@dataclass(frozen=True, slots=True)
class Verdict:
    """How one record's fate is classified, and why."""

    outcome: Outcome
    disposition: Disposition
    why: str
    message_fault: bool = False  # the record itself was refused: its lane stays READY


# refusals that are the record's own fault (its size or content), not the lane's
MESSAGE_FAULTS: Final = frozenset({"MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE",
                                   "INVALID_RECORD", "_INVALID_ARG", "_INVALID_TYPE"})


# delivery-report errors that prove the broker refused the record's batch before appending
# it; a None disposition depends on whether the destination creates its topic
_REFUSED: Final[dict[str, tuple[Disposition | None, str]]] = {
    "MSG_SIZE_TOO_LARGE": (Disposition.PERMANENT,
                           "the broker refuses a batch over max.message.bytes before appending"),
    "RECORD_LIST_TOO_LARGE": (Disposition.PERMANENT,
                              "the broker refuses a batch larger than a log segment"),
    "INVALID_RECORD": (Disposition.PERMANENT,
                       "the broker's record validation refused the batch before appending"),
    "TOPIC_AUTHORIZATION_FAILED": (Disposition.PERMANENT,
                                   "the broker refuses writes to this topic (ACL)"),
    "CLUSTER_AUTHORIZATION_FAILED": (Disposition.PERMANENT,
                                     "the broker refuses idempotent writes (ACL)"),
    "_UNKNOWN_TOPIC": (None, "the topic does not exist, so nothing was sent"),
    "UNKNOWN_TOPIC_OR_PART": (None, "the topic or partition does not exist"),
}
# refusals a broker gives a whole batch: records sharing one are retried alone to find out
BATCH_REFUSALS: Final = frozenset({"MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE",
                                   "INVALID_RECORD"})

# errors raised by produce(): the record never entered the client, so all NOT_PUBLISHED
_NOT_HANDED_OVER: Final[dict[str, tuple[Disposition | None, str]]] = {
    "_QUEUE_FULL": (Disposition.RETRIABLE, "the client's local queue is full"),
    "MSG_SIZE_TOO_LARGE": (Disposition.PERMANENT,
                           "the record is larger than the client's message.max.bytes"),
    "_INVALID_ARG": (Disposition.PERMANENT, "the client refused the record's arguments"),
    "_INVALID_TYPE": (Disposition.PERMANENT, "the client refused the record's types"),
    "_UNKNOWN_TOPIC": (None, "the topic does not exist"),
    "UNKNOWN_TOPIC_OR_PART": (None, "the topic or partition does not exist"),
    "_UNKNOWN_PARTITION": (None, "the partition does not exist"),
    "_FATAL": (Disposition.LANE_UNAVAILABLE,
               "the producer hit a fatal error and is replaced; the record is not at fault"),
    "_STATE": (Disposition.LANE_UNAVAILABLE, "the producer is in an unusable state"),
}

# named for docs/outcomes.md and the tests; any error not listed above is UNKNOWN too
AMBIGUOUS_EXAMPLES: Final = (
    "_MSG_TIMED_OUT", "_TRANSPORT", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "NOT_ENOUGH_REPLICAS", "NOT_LEADER_FOR_PARTITION", "KAFKA_STORAGE_ERROR",
    "OUT_OF_ORDER_SEQUENCE_NUMBER", "_FATAL", "_PURGE_INFLIGHT", "_PURGE_QUEUE",
    "_UNKNOWN_PARTITION",
)
# delivery-report errors after which the topic is checked (and re-created) again
TOPIC_GONE: Final = frozenset({"_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION"})


def _name(error: KafkaError | str) -> str:
    return error if isinstance(error, str) else error.name()


def _topic_disposition(create_topic: bool) -> Disposition:
    # with creation on, the lane's probe re-creates the topic: not the record's fault
    return Disposition.LANE_UNAVAILABLE if create_topic else Disposition.PERMANENT


def classify_delivery_error(error: KafkaError | str | None, *, create_topic: bool) -> Verdict:
    """The verdict for a delivery report with ``error`` (a KafkaError or its name)."""
    if error is None:
        return Verdict(Outcome.PUBLISHED, Disposition.NONE,
                       "the broker acknowledged the record with acks=all")
    name = _name(error)
    refused = _REFUSED.get(name)
    if refused is None:
        return Verdict(Outcome.UNKNOWN, Disposition.NONE,
                       "the record may have been appended before the error; it stays an "
                       "obligation until evidence settles it")
    disposition, why = refused
    return Verdict(Outcome.NOT_PUBLISHED,
                   disposition or _topic_disposition(create_topic), why,
                   message_fault=name in MESSAGE_FAULTS)


def classify_produce_error(error: KafkaError | str, *, create_topic: bool) -> Verdict:
    """The verdict for a record that ``produce()`` refused (``"_QUEUE_FULL"`` for the
    BufferError it raises): it never entered the client, so it is NOT_PUBLISHED."""
    name = _name(error)
    disposition, why = _NOT_HANDED_OVER.get(
        name, (Disposition.RETRIABLE, "produce() refused the record before queueing it"))
    return Verdict(Outcome.NOT_PUBLISHED,
                   disposition or _topic_disposition(create_topic), why,
                   message_fault=name in MESSAGE_FAULTS)
