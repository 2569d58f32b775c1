"""What ``result()`` answers: the shard's applied result for one command, and the state of
the message it names (its attempts with their evidence), as a typed value."""

from __future__ import annotations

import msgspec

from nereus.client.receipt import Receipt
from nereus.views import MessageDetail


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    """``receipt``: evidence APPLIED, ``result`` APPLIED or REJECTED with ``reason`` and
    ``detail``; ``message``: the message as its shard holds it once the command was applied
    (None when it holds none: a rejected schedule, a message already retired)."""

    receipt: Receipt
    message: MessageDetail | None

    @property
    def outcome(self) -> str:
        """APPLIED or REJECTED (STALE or RECORDED for system records)."""
        return str(self.receipt.result)

    @property
    def reason(self) -> str | None:
        reason = self.receipt.reason
        return reason if isinstance(reason, str) else None

    @property
    def state(self) -> str | None:
        """The message's state (SCHEDULED, PUBLISHING, PUBLISHED, CANCELLED, UNCERTAIN, ...)."""
        return None if self.message is None else self.message.state

    @property
    def attempts(self) -> int:
        return 0 if self.message is None else len(self.message.attempts)
