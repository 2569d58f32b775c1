"""Where a client's appends go.

``via="auto"`` (the default): through the home's running engine when one listens at its
admin socket, as the CLI's commands do (the engine appends and wakes the shard at once, so
the APPLIED result comes soonest), else straight to the route's Shard Log. ``via="log"``:
always straight to the Command Topic partition (Kafka, Pulsar) or the segment files, with
the engine's connection settings; an engine finds the records on its next read of the log
(within ``[engine]`` ``log_look_s`` when its shard is idle). A client built from a cluster
has no home: it appends to the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from nereus.adapters.admin.admin_client import AdminClient, EngineSink, NotListening
from nereus.adapters.client.route_source import RouteSource
from nereus.client.prepare import Prepared
from nereus.client.receipt import Receipt
from nereus.client.sink import LogSink

Via = Literal["auto", "log"]


class RouteAppends:
    """``append(commands of one shard) -> QUEUED receipts`` for a route (thread-safe)."""

    def __init__(self, source: RouteSource, via: Via = "auto") -> None:
        self._source = source
        self._via = via
        self._direct = LogSink(source.log)

    def __call__(self, prepared: Sequence[Prepared]) -> list[Receipt]:
        layout = self._source.layout
        if layout is not None and self._via == "auto":
            socket = layout.run / "admin.sock"
            if socket.exists():
                try:
                    return EngineSink(AdminClient(socket)).submit(prepared, wait=False)
                except NotListening:
                    pass  # no engine behind the socket file: the log itself
        return self._direct.submit(prepared, wait=False)
