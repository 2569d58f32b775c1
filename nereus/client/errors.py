"""The producer SDK's typed errors, each with the blame (and exit code) the CLI gives the
same failure (``nereus.errors``): the application can tell its own mistake from a refusal,
an unreachable route from an answer not known yet.

| error | blame | exit |
|---|---|---|
| ``InvalidInput`` | the caller's input (id, time, size, header, lane name) | 2 |
| ``UnknownLane`` | a lane the route's configuration does not have | 3 |
| ``Rejected`` / ``LaneFull`` | the shard applied the command and said no | 1 |
| ``EngineUnreachable`` | no engine answers the result query | 4 |
| ``RouteUnreachable`` | the Command Topic (broker, file log) did not take the append | 5 |
| ``ResultPending`` | queued, but applied not within the deadline | 6 |

``RouteUnreachable`` carries the prepared commands that were not acknowledged: sending
exactly those again later (``DelayClient.queue``) is the same commands, applied once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nereus.errors import NereusError, NotFound, ResultNotKnown, ServiceUnreachable, UsageError

if TYPE_CHECKING:
    from nereus.client.outcome import CommandResult
    from nereus.client.prepare import Prepared
    from nereus.client.receipt import Receipt


class InvalidInput(UsageError):
    """The input breaks a rule the shard would reject it for; nothing was sent.
    ``field`` names the argument at fault."""

    def __init__(self, message: str, *, field: str, hint: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if not message.startswith(field) else message,
                         hint=hint)
        self.field = field


class UnknownLane(NotFound):
    """The lane is not one of the route's configured lanes; nothing was sent."""


class Rejected(NereusError):
    """The shard applied the command and refused it: ``result.reason`` says why (a
    ``nereus.machine.reasons.Reason`` code), ``result.detail`` in words."""

    def __init__(self, result: CommandResult) -> None:
        receipt = result.receipt
        super().__init__(f"{receipt.kind} {receipt.delay_message_id} was REJECTED on shard "
                         f"{receipt.shard} at position {receipt.source_position}: "
                         f"{receipt.reason}: {receipt.detail}")
        self.result = result
        self.reason = str(receipt.reason)


class LaneFull(Rejected):
    """REJECTED ``LANE_FULL``: the lane holds its ``max_pending`` unfinished messages on
    that shard. Back-pressure: slow down and schedule again later (a new command)."""


class RouteUnreachable(ServiceUnreachable):
    """The route's Shard Log did not acknowledge the append within the retry policy.
    ``prepared``: the commands not acknowledged, to send again as they are."""

    def __init__(self, message: str, *, prepared: Sequence[Prepared], attempts: int,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint or "the commands are prepared: queue them again "
                         "later with DelayClient.queue(error.prepared); a command the log "
                         "took without our hearing of it is applied once")
        self.prepared = tuple(prepared)
        self.attempts = attempts


class ResultPending(ResultNotKnown):
    """The command is durable in the Shard Log (``receipt``) but its result was not known
    within the deadline: ask again later with ``result(receipt)``."""

    def __init__(self, message: str, *, receipt: Receipt, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.receipt = receipt
