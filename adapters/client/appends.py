"""Where a client's appends go. Kafka and Pulsar: straight to the route's Command Topic
partition, with the engine's connection settings. The file log: through the home's
running engine when one listens (it appends and wakes the shard at once, as the CLI's
commands do), else straight to the segment files (several writers share them safely)."""

from __future__ import annotations

from collections.abc import Sequence

from nereus.adapters.admin.admin_client import AdminClient, EngineSink, NotListening
from nereus.adapters.client.route_source import RouteSource
from nereus.client.prepare import Prepared
from nereus.client.receipt import Receipt
from nereus.client.sink import LogSink


class RouteAppends:
    """``append(commands of one shard) -> QUEUED receipts`` for a route (thread-safe)."""

    def __init__(self, source: RouteSource) -> None:
        self._source = source
        self._direct = LogSink(source.log)

    def __call__(self, prepared: Sequence[Prepared]) -> list[Receipt]:
        layout = self._source.layout
        if layout is not None and self._source.settings.log == "file":
            socket = layout.run / "admin.sock"
            if socket.exists():
                try:
                    return EngineSink(AdminClient(socket)).submit(prepared, wait=False)
                except NotListening:
                    pass  # no engine behind the socket file: the files themselves
        return self._direct.submit(prepared, wait=False)
