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
from nereus.client.receipt import Evidence, Receipt
from nereus.client.sink import CommandSink, LogSink

__all__ = ["Appender", "CommandSink", "Evidence", "LogSink", "Prepared", "Queued", "Receipt",
           "RouteRef", "prepare_cancel", "prepare_payload_commit", "prepare_payload_reserve",
           "prepare_reschedule", "prepare_schedule", "queue"]
