"""Where the dashboard's data comes from: one Protocol, one real implementation.

The app never talks to a socket itself; it is handed a ``DashboardSource``. The real one
(``nereus.tui.admin_source.AdminSource``) wraps the engine's admin socket; tests hand in
fixed data. Every method blocks, so the app calls them only from worker threads: a slow
or absent engine can never freeze the keyboard.

Contract: ``snapshots`` yields one ``Snapshot`` per feed tick until ``stop`` is set (then
it returns) or the feed ends; it raises a ``NereusError`` (usually ``EngineUnreachable``)
when no engine answers. The caller reconnects after a pause either way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from nereus.adapters.admin.wire import EngineStatus, MessageExplanation, OpenAttemptView
from nereus.views import MessageDetail, MessageView


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """One tick of the feed: the engine's status (``GET /v1/status``) and its open attempts
    (``GET /v1/attempts``: PUBLISHING and UNKNOWN), typed as the admin wire has them."""

    status: EngineStatus
    attempts: Sequence[OpenAttemptView] = field(default_factory=tuple)


class DashboardSource(Protocol):
    """What the dashboard reads. All calls block; call them from a worker thread."""

    @property
    def where(self) -> str:
        """Where the engine is expected to answer (the admin socket path), for messages."""
        ...

    def snapshots(self, stop: threading.Event) -> Iterator[Snapshot]:
        """One snapshot per tick until ``stop`` is set; raises NereusError when unreachable."""
        ...

    def message(self, delay_message_id: str, *, route: str) -> MessageDetail:
        """One message with its attempts (``GET /v1/messages/<id>``); NotFound if absent."""
        ...

    def explain(self, delay_message_id: str, *, route: str) -> MessageExplanation:
        """Why the message waits: every scheduler gate and the first that holds it
        (``GET /v1/explain/<id>``); NotFound if absent."""
        ...

    def messages(self, *, lane: str | None = None, shard: str | None = None,
                 limit: int = 50) -> Sequence[MessageView]:
        """Messages of a lane or shard (``GET /v1/messages``), at most ``limit``."""
        ...
