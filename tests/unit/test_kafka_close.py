"""close_consumer: a Kafka consumer's close is waited for a bounded time, never forever."""

from __future__ import annotations

import threading
import time

import pytest

from nereus.adapters.backends.kafka.kafka_client import close_consumer


class FakeConsumer:
    """close() returns at once, raises, or blocks until released."""

    def __init__(self, *, raises: bool = False, blocks: bool = False) -> None:
        self.raises = raises
        self.release = threading.Event()
        if not blocks:
            self.release.set()
        self.closed = threading.Event()

    def close(self) -> None:
        self.release.wait()
        self.closed.set()
        if self.raises:
            raise RuntimeError("broker handle already gone")


def test_a_consumer_that_closes_is_closed_and_reported_so() -> None:
    """A prompt close: True, and the consumer's close really ran."""
    consumer = FakeConsumer()
    assert close_consumer(consumer, "kafka:t/0", 5.0) is True
    assert consumer.closed.is_set()


def test_a_close_that_raises_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """An exception from close() is a warning naming what was closed; the caller goes on."""
    consumer = FakeConsumer(raises=True)
    assert close_consumer(consumer, "kafka:t/0", 5.0) is True
    assert "closing the Kafka consumer of kafka:t/0 failed" in caplog.text
    assert "broker handle already gone" in caplog.text


def test_a_close_that_hangs_is_abandoned_after_the_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A close that never returns (librdkafka issue 4514): False after the wait, an error
    line naming the consumer, and the close left running in its daemon thread."""
    consumer = FakeConsumer(blocks=True)
    started = time.monotonic()
    assert close_consumer(consumer, "kafka:t/0", 0.2) is False
    assert time.monotonic() - started >= 0.2
    assert "kafka:t/0 did not close within 0.2s" in caplog.text
    closer = [t for t in threading.enumerate() if t.name == "kafka-close"]
    assert closer and all(t.daemon for t in closer)
    consumer.release.set()
    assert consumer.closed.wait(5)
