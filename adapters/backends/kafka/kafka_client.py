"""What the Kafka Shard Log and the Kafka destination share: client settings, topic checks.

``confluent_kafka`` is imported inside the functions, never at module level, so that
importing ``nereus.engine`` (or running ``nereus --help``) does not load librdkafka.

Every client is made with ``allow.auto.create.topics = false``: a topic is created on
purpose, with the settings its user needs (``message.timestamp.type = LogAppendTime`` for
a Command Topic), or it does not exist. A metadata request must never create one behind
our back with the broker's defaults.

Failures to reach the broker (``_TRANSPORT``, ``_TIMED_OUT``, ``_ALL_BROKERS_DOWN``, ...)
become ``ServiceUnreachable`` (exit 5) naming the bootstrap address; a topic that exists
but cannot serve (too few partitions, the wrong timestamp type) is ``TopicMisconfigured``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, Protocol, TypeAlias

from nereus.adapters.backends.kafka.kafka_security import (
    error_callback,
    forget_refusal,
    refusal,
    security_settings,
)
from nereus.errors import NereusError, NotFound, ServiceUnreachable, UsageError

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin._metadata import ClusterMetadata

LOG: Final = logging.getLogger("nereus.engine.kafka")

# error names (KafkaError.name()) that say "no broker answered", not "the broker said no"
UNREACHABLE_ERRORS: Final = frozenset({
    "_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_MSG_TIMED_OUT",
    "REQUEST_TIMED_OUT", "_WAIT_COORD", "COORDINATOR_NOT_AVAILABLE", "_DESTROY",
    "BROKER_NOT_AVAILABLE", "NETWORK_EXCEPTION", "LEADER_NOT_AVAILABLE",
})

_LEADER_WAIT_S: Final = 0.05
_SLICE_S: Final = 1.0  # a metadata request's slice (``metadata``)
# a consumer that takes longer than this to close is abandoned (close_consumer)
CLOSE_WAIT_S: Final = 5.0


class TopicMisconfigured(UsageError):
    """A topic exists but cannot serve as asked (partitions, timestamp type, access)."""


class CommitCallback(Protocol):
    """A consumer's ``on_commit``: the commit's error (None on success) and its partitions."""

    def __call__(self, err: KafkaError | None, partitions: list[TopicPartition], /) -> None: ...


# the value of one librdkafka setting as our clients give it: a number, a flag or a name,
# the stdlib logger that serves librdkafka's log lines, or the consumer's commit callback
KafkaSetting: TypeAlias = (str | int | float | bool | logging.Logger | CommitCallback
                           | Callable[["KafkaError"], None])
# a client's configuration, as confluent-kafka's Producer and Consumer take it
KafkaConfig: TypeAlias = dict[str, KafkaSetting]


def client_config(
    bootstrap: str, client_id: str, extra: Mapping[str, KafkaSetting]
) -> KafkaConfig:
    """Settings every client shares (the cluster's TLS and authentication among them),
    plus ``extra`` (``{"linger.ms": 2}``)."""
    config: KafkaConfig = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "allow.auto.create.topics": False,
        # librdkafka's own log lines go to the stdlib logger (served by poll/flush)
        "logger": LOG,
        "error_cb": error_callback(bootstrap),
        **security_settings(bootstrap),
    }
    config.update(extra)
    return config


def idempotent_producer(timeout_s: float, linger_ms: int) -> KafkaConfig:
    """What every producer of ours asks of the broker: idempotence (no duplicate from a
    retried send), every in-sync replica's ack, and a delivery bounded by ``timeout_s``."""
    timeout_ms = max(1, int(timeout_s * 1000))
    return {
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": linger_ms,
        "delivery.timeout.ms": max(timeout_ms, linger_ms + 1),
        "request.timeout.ms": min(30_000, timeout_ms),
    }


def admin_client(bootstrap: str, client_id: str) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    # no "logger" here: an AdminClient's log queue is only served by its poll(), which
    # nothing calls, so its lines would pile up; librdkafka writes them to stderr instead
    settings: KafkaConfig = {
        "bootstrap.servers": bootstrap, "client.id": client_id,
        "allow.auto.create.topics": False, "error_cb": error_callback(bootstrap),
        **security_settings(bootstrap),
    }
    return AdminClient(settings)  # type: ignore[arg-type]  # the stubs omit "error_cb"


class Closable(Protocol):
    """What ``close_consumer`` needs of a consumer (a confluent-kafka ``Consumer``)."""

    def close(self) -> None: ...


def close_consumer(consumer: Closable, what: str, wait_s: float) -> bool:
    """Close ``consumer``, waiting at most ``wait_s``; False (logged) if it did not finish.

    librdkafka can deadlock in its destroy when an offset reset is in flight (issue 4514,
    still open in 2.16: the reset's reply op re-enters the partition lock it holds), and
    then ``close()`` never returns. The close runs in a daemon thread so that a shard, a
    scan or the engine's shutdown is never held by it: a consumer that does not close in
    time is abandoned (its threads and socket stay until the process exits). Our consumers
    never commit on close, so nothing is lost with it.
    """
    done = threading.Event()

    def run() -> None:
        try:
            consumer.close()
        except Exception as exc:  # a failed close is only worth a log line
            LOG.warning("closing the Kafka consumer of %s failed: %s", what, exc)
        finally:
            done.set()

    threading.Thread(target=run, name="kafka-close", daemon=True).start()
    if done.wait(wait_s):
        return True
    LOG.error("the Kafka consumer of %s did not close within %gs (librdkafka can deadlock "
              "in its destroy, issue 4514); it is abandoned until the process exits",
              what, wait_s)
    return False


def error_of(exc: BaseException) -> tuple[str, str]:
    """(librdkafka error name, its text) of a KafkaException; ("", str(exc)) otherwise."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].name(), exc.args[0].str()
    return "", str(exc)


def unreachable(bootstrap: str, doing: str, detail: object) -> ServiceUnreachable:
    refused = refusal(bootstrap, doing)
    if refused is not None:
        return refused
    return ServiceUnreachable(
        f"Kafka at {bootstrap} is unreachable ({doing}): {detail}",
        hint="is the broker running and is the bootstrap address right? "
        "(`scripts/services up kafka` starts a local one)",
    )


def translate(exc: BaseException, bootstrap: str, doing: str) -> NereusError:
    """The error to raise for a client exception: ``ServiceUnreachable`` when no broker
    answered, else a ``NereusError`` naming the broker's refusal."""
    name, text = error_of(exc)
    if name in UNREACHABLE_ERRORS:
        return unreachable(bootstrap, doing, text)
    return NereusError(f"Kafka at {bootstrap} refused {doing}: {name or type(exc).__name__}: "
                       f"{text}")


def metadata(admin: AdminClient, bootstrap: str, doing: str, timeout_s: float,
             topic: str | None = None) -> ClusterMetadata:
    """``admin.list_topics`` within ``timeout_s``, asked in slices of at most a second: a
    broker that refused our credentials or certificate (librdkafka retries that until the
    deadline, then says only "transport failure") is named after the first slice."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        try:
            found = admin.list_topics(topic=topic, timeout=max(0.1, min(_SLICE_S, remaining)))
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb: an authentication or TLS refusal is named
            refused = refusal(bootstrap, doing)
            if refused is not None:
                raise refused from None
            if remaining <= _SLICE_S or error_of(exc)[0] not in UNREACHABLE_ERRORS:
                raise translate(exc, bootstrap, doing) from None
            continue  # no answer in this slice (down, or slow): ask again until the deadline
        forget_refusal(bootstrap)
        return found


def partition_count(
    admin: AdminClient, bootstrap: str, topic: str, timeout_s: float
) -> int | None:
    """How many partitions ``topic`` has, or None if it does not exist (one metadata call)."""
    from confluent_kafka import KafkaError

    found = metadata(admin, bootstrap, f"metadata request for topic {topic}", timeout_s,
                     topic).topics.get(topic)
    if found is None:
        return None
    if found.error is not None:
        if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        if found.error.name() in UNREACHABLE_ERRORS:
            raise unreachable(bootstrap, f"metadata of topic {topic}", found.error.str())
        raise TopicMisconfigured(
            f"Kafka at {bootstrap}: topic {topic} cannot be used: {found.error.name()}: "
            f"{found.error.str()}")
    return len(found.partitions)


def ensure_topic(
    bootstrap: str,
    topic: str,
    *,
    client_id: str,
    partitions: int,
    config: Mapping[str, str],
    create: bool,
    timeout_s: float,
    metadata_timeout_s: float | None = None,
    admin: AdminClient | None = None,
    replication_factor: int = -1,
) -> bool:
    """Make sure ``topic`` exists with at least ``partitions`` partitions, all led.

    Creates it (``replication_factor``, -1 for the brokers' default; ``config``) when missing
    and ``create`` is set; a topic
    someone else created meanwhile is fine. Returns whether this call created it. Raises
    ``ServiceUnreachable`` when no broker answers within ``timeout_s``, ``NotFound`` when it
    is missing and may not be created, ``TopicMisconfigured`` when it has too few
    partitions. The first metadata request waits ``metadata_timeout_s`` (default
    ``timeout_s``), so a readiness probe can give up sooner than a creation would.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # not re-exported

    admin = admin or admin_client(bootstrap, client_id)
    deadline = time.monotonic() + timeout_s
    count = partition_count(admin, bootstrap, topic,
                            timeout_s if metadata_timeout_s is None else metadata_timeout_s)
    created = False
    if count is None:
        if not create:
            raise NotFound(
                f"Kafka at {bootstrap}: topic {topic} does not exist (and creating it is off)",
                hint="create the topic, or let Nereus create it")
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                      config=dict(config))],
            operation_timeout=timeout_s, request_timeout=timeout_s)
        try:
            futures[topic].result(timeout=max(0.1, deadline - time.monotonic()))
            created = True
        except KafkaException as exc:
            if error_of(exc)[0] != "TOPIC_ALREADY_EXISTS":
                raise translate(exc, bootstrap, f"creating topic {topic}") from None
        except TimeoutError:
            raise unreachable(bootstrap, f"creating topic {topic}",
                              f"no answer within {timeout_s:g}s") from None
        count = _wait_for_leaders(admin, bootstrap, topic, partitions, deadline)
    if count < partitions:
        raise TopicMisconfigured(
            f"Kafka at {bootstrap}: topic {topic} has {count} partition(s); "
            f"{partitions} are needed",
            hint="add partitions to the topic (kafka-topics --alter --partitions) or use "
            "another topic")
    return created


def _wait_for_leaders(
    admin: AdminClient, bootstrap: str, topic: str, partitions: int, deadline: float
) -> int:
    """Wait until a new topic's metadata shows every partition with a leader."""
    while True:
        remaining = deadline - time.monotonic()
        found = metadata(admin, bootstrap, f"metadata request for topic {topic}",
                         max(0.1, remaining), topic).topics.get(topic)
        if (found is not None and found.error is None
                and len(found.partitions) >= partitions
                and all(p.leader >= 0 for p in found.partitions.values())):
            return len(found.partitions)
        if remaining <= 0:
            raise unreachable(bootstrap, f"waiting for topic {topic} to get leaders",
                              "the topic was created but has no leader yet")
        time.sleep(_LEADER_WAIT_S)


def broker_count(admin: AdminClient, bootstrap: str, timeout_s: float) -> int:
    """How many brokers the cluster has (one metadata call)."""
    return len(metadata(admin, bootstrap, "a metadata request", timeout_s).brokers)


def replica_count(admin: AdminClient, bootstrap: str, topic: str, timeout_s: float) -> int:
    """The replication factor of ``topic`` (replicas of its first partition)."""
    found = metadata(admin, bootstrap, f"metadata request for topic {topic}", timeout_s,
                     topic).topics.get(topic)
    if found is None or not found.partitions:
        return 0
    return len(next(iter(found.partitions.values())).replicas)


def topic_settings(
    admin: AdminClient, bootstrap: str, topic: str, timeout_s: float
) -> dict[str, str]:
    """The topic's effective configuration (DescribeConfigs)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        ConfigResource,
        ResourceType,
    )

    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)],
                                     request_timeout=timeout_s)
    try:
        (future,) = futures.values()
        entries = future.result(timeout=timeout_s)
    except KafkaException as exc:
        admin.poll(0)  # serves error_cb: an authentication or TLS refusal is named
        raise translate(exc, bootstrap, f"describing topic {topic}") from None
    except TimeoutError:
        raise unreachable(bootstrap, f"describing topic {topic}",
                          f"no answer within {timeout_s:g}s") from None
    return {name: str(entry.value) for name, entry in entries.items()}
