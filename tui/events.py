"""The Textual messages the dashboard's workers post to it (thread-safe to post).

Workers never touch widgets; they post one of these and the app or screen that owns the
widgets handles it on the UI thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.message import Message

from nereus.adapters.admin.wire import MessageExplanation
from nereus.tui.cluster_models import ClusterOverview
from nereus.tui.mutations import MutationOutcome
from nereus.tui.source import Snapshot
from nereus.views import MessageDetail, MessageView


class FeedUpdated(Message):
    """A feed tick arrived."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class FeedLost(Message):
    """The feed failed or ended; the worker will reconnect after a pause."""

    def __init__(self, problem: str, hint: str | None) -> None:
        super().__init__()
        self.problem = problem
        self.hint = hint


class MutationFinished(Message):
    """A CLI mutation ended (successfully or not)."""

    def __init__(self, outcome: MutationOutcome) -> None:
        super().__init__()
        self.outcome = outcome


class MessageLoaded(Message):
    """``GET /v1/messages/<id>`` answered (``document``) or failed (``error``)."""

    def __init__(self, document: MessageDetail | None, error: str | None,
                 explained: MessageExplanation | None = None) -> None:
        super().__init__()
        self.document = document
        self.error = error
        self.explained = explained  # ``GET /v1/explain/<id>``, when it answered


class MessagesLoaded(Message):
    """``GET /v1/messages`` for a lane or shard answered (``documents``) or failed."""

    def __init__(self, documents: Sequence[MessageView], error: str | None) -> None:
        super().__init__()
        self.documents = documents
        self.error = error


class ClusterUpdated(Message):
    """The cluster screen's worker read the coordinator's records."""

    def __init__(self, overview: ClusterOverview) -> None:
        super().__init__()
        self.overview = overview


class ClusterLost(Message):
    """The cluster screen's worker could not read the coordinator; it tries again."""

    def __init__(self, problem: str, hint: str | None) -> None:
        super().__init__()
        self.problem = problem
        self.hint = hint
