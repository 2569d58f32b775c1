"""One way to submit commands: a ``CommandSink`` appends prepared records to their shards'
Shard Logs and answers with typed ``Receipt`` values (``nereus.client.receipt``).

Two sinks exist. ``LogSink`` (here: the I/O is the appender it is given) appends straight
to the logs — the embedded default with no engine, tests, library users; its receipts are
QUEUED. The engine's sink (``nereus.adapters.admin.admin_client.EngineSink``) sends the records
to the running engine, which appends them and, asked to wait, answers with the APPLIED
result. The CLI's message, mutation and batch paths all go through one of the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from nereus.client.prepare import Prepared
from nereus.client.queue import Appender, queue
from nereus.client.receipt import Receipt
from nereus.shard import ShardId

__all__ = ["CommandSink", "LogSink", "Receipt"]  # Receipt lives in nereus.client.receipt


class CommandSink(Protocol):
    """Appends prepared commands (grouped per shard, in order) and answers one receipt each,
    in the order given. ``wait``: answer with the APPLIED result where the shard applies
    the command in time (a sink that cannot wait refuses)."""

    def submit(self, prepared: Sequence[Prepared], *, wait: bool) -> list[Receipt]: ...


class LogSink:
    """Straight to the Shard Logs (no engine): QUEUED receipts; it cannot wait."""

    def __init__(self, log_for: Callable[[ShardId], Appender]) -> None:
        self._log_for = log_for

    def submit(self, prepared: Sequence[Prepared], *, wait: bool) -> list[Receipt]:
        if wait:
            raise ValueError("a LogSink cannot wait for results: no engine applies them here")
        return [Receipt.queued(kind=q.prepared.kind,
                               delay_message_id=q.prepared.delay_message_id,
                               command_id=q.prepared.command_id, shard=str(q.prepared.shard),
                               position=q.position, broker_ms=q.broker_ms)
                for q in queue(prepared, self._log_for)]
