"""The client API: prepare a command (identity and bytes fixed), then queue it; the
producer SDK (``DelayClient``, ``AsyncDelayClient``) on top."""

from typing import TYPE_CHECKING

from nereus.client.errors import (
    InvalidInput,
    LaneFull,
    Rejected,
    ResultPending,
    RouteUnreachable,
    UnknownLane,
)
from nereus.client.outcome import CommandResult
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
from nereus.client.retry import RetryPolicy
from nereus.client.sink import CommandSink, LogSink

__all__ = ["Appender", "AsyncDelayClient", "Batching", "CommandResult", "CommandSink",
           "DelayClient", "Evidence", "InvalidInput", "LaneFull", "LogSink", "Prepared",
           "Queued", "Receipt", "Rejected", "ResultPending", "RetryPolicy", "RouteRef",
           "RouteUnreachable", "UnknownLane", "prepare_cancel", "prepare_payload_commit",
           "prepare_payload_reserve", "prepare_reschedule", "prepare_schedule", "queue"]

# The producer SDK (``docs/client.md``) does I/O, so it lives in ``nereus.adapters.client``
# (the core has no threads, clocks or sockets); its names are here, imported on first use.
_SDK = {"DelayClient": "nereus.adapters.client.delay_client",
        "AsyncDelayClient": "nereus.adapters.client.async_client",
        "Batching": "nereus.adapters.client.sender"}

if TYPE_CHECKING:
    from nereus.adapters.client.async_client import AsyncDelayClient
    from nereus.adapters.client.delay_client import DelayClient
    from nereus.adapters.client.sender import Batching


def __getattr__(name: str) -> object:
    module = _SDK.get(name)
    if module is None:
        raise AttributeError(f"module 'nereus.client' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
