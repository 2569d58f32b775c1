"""The real data source: the engine's admin socket (``AdminClient``).

The status feed (``GET /v1/feed``) drives the dashboard; open attempts are polled once per
feed document (``GET /v1/attempts``, the first ``ATTEMPT_LIMIT``) so each snapshot is
consistent to within one tick.
Every transport failure, whatever its type, leaves here as ``EngineUnreachable`` naming the
socket, so the app has one error to show and retry on.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from nereus.adapters.admin.admin_client import AdminClient, typed_answer
from nereus.adapters.admin.wire import AttemptList, EngineStatus, MessageExplanation
from nereus.errors import EngineUnreachable, NereusError
from nereus.tui.source import Snapshot
from nereus.views import MessageDetail, MessageList, MessageView

START_HINT = "start it with `nereus engine start`"
# open attempts read per feed tick, at most: the counts come from the status document (the
# lanes' counters), so a shard with a million UNCERTAIN messages costs the same each second
ATTEMPT_LIMIT = 500


class AdminSource:
    """A ``DashboardSource`` over ``<home>/run/admin.sock``."""

    def __init__(self, socket_path: Path, *, interval_s: float = 1.0,
                 timeout_s: float = 5.0) -> None:
        self.socket_path = Path(socket_path)
        self.interval_s = interval_s
        # A short timeout bounds how long a hung engine can hold the feed thread (and so
        # how long quitting the dashboard can take).
        self._client = AdminClient(self.socket_path, timeout=timeout_s)

    @property
    def where(self) -> str:
        return str(self.socket_path)

    def snapshots(self, stop: threading.Event) -> Iterator[Snapshot]:
        feed = self._client.feed(self.interval_s)
        try:
            while not stop.is_set():
                try:
                    status = next(feed)
                except StopIteration:
                    return  # the engine hung up (stopping): the caller reconnects
                if stop.is_set():
                    return
                attempts = self._client.read("/v1/attempts", AttemptList, limit=ATTEMPT_LIMIT)
                yield Snapshot(status=typed_answer(status, EngineStatus, "/v1/feed"),
                               attempts=attempts.attempts)
        except NereusError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise EngineUnreachable(f"the engine at {self.socket_path} stopped answering: "
                                    f"{exc}", hint=START_HINT) from None
        finally:
            feed.close()

    def message(self, delay_message_id: str, *, route: str) -> MessageDetail:
        return typed_answer(self._client.message(delay_message_id, route=route, barrier=False),
                            MessageDetail, "/v1/messages")

    def explain(self, delay_message_id: str, *, route: str) -> MessageExplanation:
        return typed_answer(self._client.explain(delay_message_id, route=route),
                            MessageExplanation, "/v1/explain")

    def messages(self, *, lane: str | None = None, shard: str | None = None,
                 limit: int = 50) -> Sequence[MessageView]:
        return self._client.read("/v1/messages", MessageList, lane=lane, shard=shard,
                                 limit=limit).messages

