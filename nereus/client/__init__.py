"""The client API: prepare a command (identity and bytes fixed), then queue it."""

from nereus.client.prepare import (
    Prepared,
    RouteRef,
    prepare_cancel,
    prepare_payload_commit,
    prepare_payload_reserve,
    prepare_reschedule,
    prepare_schedule,
)
from nereus.client.queue import Appender, Queued, queue
from nereus.client.sink import CommandSink, LogSink, Receipt

__all__ = ["Appender", "CommandSink", "LogSink", "Prepared", "Queued", "Receipt", "RouteRef",
           "prepare_cancel",
           "prepare_payload_commit", "prepare_payload_reserve", "prepare_reschedule",
           "prepare_schedule", "queue"]
