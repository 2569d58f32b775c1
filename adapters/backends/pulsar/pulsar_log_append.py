"""Sending one window of a Pulsar Shard Log append and waiting until the broker confirmed it.

**Durability.** ``send_window`` returns positions only after every send of the window was
acknowledged by the broker, i.e. persisted to the ledger's ack quorum; it raises if any
failed (records before the failure may be in the log; appends carry their own ids and
re-applying is a no-op). An unanswered send counts as failed once ``timeout_s`` (the
producer's send timeout) and a grace period have passed: the wait is bounded.

Every message is sent with the append's stamp as its *event time* (the Python client cannot
read the broker's entry metadata; ``pulsar.py`` says why). A message the broker batched
would break the one-record-per-entry positions: it raises ``LogCorruption``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from nereus.adapters.backends.pulsar.pulsar_client import (
    UNREACHABLE_RESULTS,
    result_name,
    unreachable,
)
from nereus.adapters.backends.pulsar.pulsar_positions import encode_position
from nereus.errors import LogCorruption, NereusError

if TYPE_CHECKING:
    from pulsar import Producer

_CALLBACK_GRACE_S: Final = 5.0
# one message's answer: (the result's name, its MessageId), None while none came
_Answer: TypeAlias = tuple[str, Any] | None


def send_window(
    producer: Producer,
    window: Sequence[bytes],
    *,
    stamp: int,
    total: int,
    timeout_s: float,
    service_url: str,
    topic: str,
) -> list[int]:
    """Send ``window`` (part of an append of ``total`` records) in order, stamped
    ``stamp``; the positions once all were confirmed, else raise naming the first failure."""
    answers, refused = _send(producer, window, stamp, timeout_s + _CALLBACK_GRACE_S)
    return _positions(answers, refused, total=total, service_url=service_url, topic=topic)


def _send(
    producer: Producer, window: Sequence[bytes], stamp: int, wait_s: float
) -> tuple[list[_Answer], str | None]:
    """Send every payload asynchronously and wait up to ``wait_s`` for all answers; the
    answers, and why the client refused to build a message (then it and the rest are
    ``NotSent``)."""
    count = len(window)
    results: list[_Answer] = [None] * count
    done = threading.Condition()

    def callback_for(index: int) -> Callable[[object, Any], None]:
        def callback(result: object, message_id: Any) -> None:
            # an exception escaping a pulsar callback terminates the process
            try:
                with done:
                    results[index] = (result_name(result), message_id)
                    done.notify_all()
            except BaseException:  # pragma: no cover - nothing here can fail
                pass
        return callback

    refused: str | None = None
    for index, payload in enumerate(window):
        try:
            producer.send_async(payload, callback_for(index), event_timestamp=stamp)
        except Exception as exc:  # the message could not be built: nothing sent
            refused = f"{type(exc).__name__}: {exc}"
            for rest in range(index, count):
                results[rest] = ("NotSent", None)
            break
    deadline = time.monotonic() + wait_s
    with done:
        while any(r is None for r in results):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            done.wait(left)
        return list(results), refused


def _positions(
    answers: list[_Answer], refused: str | None, *, total: int, service_url: str, topic: str
) -> list[int]:
    """The positions of confirmed sends; raises unless every send was confirmed."""
    import pulsar

    positions: list[int] = []
    failed: list[tuple[int, str]] = []
    for index, got in enumerate(answers):
        if got is None:
            failed.append((index, "no answer"))
        elif got[0] != pulsar.Result.Ok.name:
            failed.append((index, got[0]))
        else:
            message_id = got[1]
            if message_id.batch_index() >= 0:
                raise LogCorruption(
                    f"{topic}: message {message_id} was batched; the "
                    "Shard Log producer must send one message per entry",
                    path=topic, offset=-1)
            positions.append(encode_position(message_id.ledger_id(), message_id.entry_id()))
    if failed:
        first_index, first = failed[0]
        detail = (f"{len(failed)} of {len(answers)} records (of {total} in this append) were "
                  f"not confirmed, the first at index {first_index}: "
                  f"{refused if first == 'NotSent' and refused else first}; records before "
                  "a failure may be in the log")
        if first in UNREACHABLE_RESULTS or first == "no answer":
            raise unreachable(service_url, f"append to {topic}", detail)
        raise NereusError(f"Pulsar at {service_url} refused an append to {topic}: {detail}")
    return positions
