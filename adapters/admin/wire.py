"""The admin socket's requests, answers and documents, as typed values shared by the engine
(which decodes requests and encodes answers), the admin client, the CLI and the dashboard
(the reverse). The status documents are what ``engine status`` prints (``--json``), the
dashboard reads, and the man page documents (their keys, by ``nereus.cli.json_keys.typed``).

Bytes travel as base64 strings (msgspec's encoding of ``bytes``). A request that does not
fit its type is a 400 naming the field (``Expected `int`, got `float` - at `$.wait_ms```).
"""

from __future__ import annotations

from typing import Annotated, TypeVar

import msgspec

from nereus.adapters.offline.command_lookup import CommandStatus
from nereus.client.receipt import Receipt
from nereus.errors import UsageError
from nereus.operator.plan import PlanDocument
from nereus.views import AttemptView, MessageDetail, MessageList, MessageView

T = TypeVar("T", bound=msgspec.Struct)

# Documents built below this room (the core's views of the state, the offline command
# lookup) are answered as they are: named here too, so this is the one catalogue (but for
# ``checkpoint_take.CheckpointTaken``, whose module costs ~70 ms to import).
__all__ = [
    "AppendAnswer", "AppendRequest", "AttemptList", "AttemptView", "CheckpointRequest",
    "CommandStatus", "Empty", "EngineStatus", "EvidenceSearchView",
    "GateView", "LaneShardView", "LaneView", "MessageDetail", "MessageExplanation",
    "MessageList", "MessageView", "MetricsExposition", "OpenAttemptView", "PlanAnswer",
    "PlanRequest", "Receipt", "RecordToAppend", "ShardView", "Stopping", "TrustedTimeView",
    "WorkerView", "request_of",
]


class RecordToAppend(msgspec.Struct, frozen=True, kw_only=True):
    """One prepared command: its shard and bytes, and its identity (``Prepared``), which
    its ``Receipt`` names."""

    shard: str
    data: bytes
    kind: str = ""
    command_id: str = ""
    delay_message_id: str | None = None

    def queued(self, position: int, broker_ms: int) -> Receipt:
        """Its receipt once the log holds it at ``position``."""
        return Receipt.queued(kind=self.kind, delay_message_id=self.delay_message_id,
                              command_id=self.command_id, shard=self.shard,
                              position=position, broker_ms=broker_ms)


class AppendRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /v1/commands``: records to append, grouped per shard by the engine; with
    ``wait_ms`` above 0 the answer carries each one's applied result once the shard applied
    it within that time."""

    records: Annotated[list[RecordToAppend], msgspec.Meta(min_length=1)]
    wait_ms: Annotated[int, msgspec.Meta(ge=0, le=600_000)] = 0


class AppendAnswer(msgspec.Struct, frozen=True, kw_only=True):
    receipts: list[Receipt]  # one per request record, in the request's order


class PlanRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /v1/mutations/plan``: one operator mutation (its record) to plan against the
    live shard, after the records in ``before`` (earlier mutations of the same batch)."""

    shard: str
    data: bytes
    before: list[bytes] = msgspec.field(default_factory=list)


class PlanAnswer(PlanDocument, frozen=True, kw_only=True):
    shard: str


class CheckpointRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /v1/checkpoints``: take one shard's checkpoint now, answering once it is
    catalogued (or failing after ``timeout_s``)."""

    shard: str
    timeout_s: Annotated[float, msgspec.Meta(ge=1, le=86_400)] = 3600


class Empty(msgspec.Struct, frozen=True):
    """A request with no fields (``POST /v1/shutdown``)."""


class Stopping(msgspec.Struct, frozen=True):
    """``POST /v1/shutdown``'s answer: the engine has begun to stop."""

    stopping: bool


# the status documents (``GET /v1/status``, ``/v1/feed``, ``/v1/attempts``, ``/v1/metrics``)


class TrustedTimeView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    earliest: str
    latest: str
    uncertainty_ms: int
    # how far earliest is held behind the wall clock: a step forwards while the engine
    # ran, not trusted until it restarts (0: none)
    held_back_ms: int = 0
    # why no decision may be made (chrony) or decisions are late (a step forwards), or null
    problem: str | None = None


class ShardView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One shard of this engine: its loop's state and where it stands in its log."""

    shard: str
    state: str
    epoch: int
    applied_position: int | None
    log_end_position: int | None
    lag: int | None
    caught_up: bool
    claims: int
    in_flight: int
    admissions: int
    uncertain: int
    error: str | None
    waiting: str | None
    due_backlog: int
    # due_backlog counted up to a cap per lane (status_views.DUE_SCAN_CAP): true when more
    # are due, so due_backlog is "at least"
    due_backlog_capped: bool = False


class LaneShardView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    shard: str
    gate: str
    due_backlog: int
    open_attempts: int
    admissions: int
    due_backlog_capped: bool = False  # due_backlog is "at least": more were due than read


class LaneView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One lane across this engine's shards: gate, readiness, backlog, lag, counts."""

    lane: str
    destination: str | None
    gate: str
    readiness: str
    not_ready_reason: str | None
    due_backlog: int
    in_flight: int
    open_attempts: int
    # its messages PUBLISHED over this engine's shards: the replicated per-state counts, so
    # a restart keeps them (a message retention removed is no longer counted)
    published: int
    failures: int  # failed publish calls since this engine started
    messages_by_state: dict[str, int]
    admissions: int
    due_lag_p99_ms: int | None
    due_lag_max_ms: int | None
    shards: list[LaneShardView]
    # true: due_backlog is a lower bound (some shard had more due than the cap it reads)
    # and due_lag_p99_ms an upper bound (the p99 of the oldest entries read)
    due_backlog_capped: bool = False
    # the lane's unfinished messages by why they wait now: "not due" (Trusted UTC has not
    # reached actionAt), the reason each shard's last scheduling round gave for its due
    # ones ("claimable" when it gave none), "PUBLISHING" (an attempt in flight), "UNCERTAIN"
    # (an earlier attempt's outcome is unknown); `message explain` details one message
    waiting_by_reason: dict[str, int] = msgspec.field(default_factory=dict)
    published_since_start: int = 0  # publish calls acknowledged since this engine started
    # its attempts UNKNOWN (their messages UNCERTAIN) and how long the oldest has been open
    # (since its admission; null: none); how it fences a dead owner's sends, null: it does
    # not, so a crash leaves that owner's in-flight attempts UNCERTAIN (docs/rules.md §10)
    uncertain: int = 0
    uncertain_oldest_age_ms: int | None = None
    fencing: str | None = None


class EvidenceSearchView(msgspec.Struct, frozen=True, kw_only=True,
                         forbid_unknown_fields=True):
    """The evidence worker's last search of the destination for an UNKNOWN attempt's record:
    when, the evidence it found (null: none), or why it could not look."""

    searched_at: str
    found: str | None
    error: str | None


class OpenAttemptView(AttemptView, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One attempt with an open obligation (PUBLISHING or UNKNOWN), as ``attempt list``
    prints it (``GET /v1/attempts``): the attempt, its shard, and the evidence worker's
    last search for it (null before the first, or with no evidence worker)."""

    shard: str
    evidence_search: EvidenceSearchView | None


class AttemptList(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``GET /v1/attempts``: the open attempts asked for (``limit`` of them at most)."""

    attempts: list[OpenAttemptView]


class WorkerView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One supervised worker thread: its state, restarts and last error."""

    name: str
    kind: str
    state: str
    restarts: int
    last_error: str | None
    last_error_at: str | None


class EngineStatus(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The running engine: healthy or not (and why), its clock, shards, lanes, workers."""

    running: bool
    healthy: bool
    problems: list[str]
    owner_id: str
    home: str
    started_at: str
    trusted_time: TrustedTimeView
    shards: list[ShardView]
    lanes: list[LaneView]
    workers: list[WorkerView]


class MetricsExposition(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``GET /v1/metrics`` and ``nereus metrics --json``: the engine's Prometheus metrics in
    the text exposition format (what ``[metrics] listen`` serves at ``/metrics``)."""

    content_type: str  # "text/plain; version=0.0.4; charset=utf-8"
    exposition: str


# ``GET /v1/explain/<id>`` (``nereus message explain``)


class GateView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One gate: its name, whether it holds the message back now, and its value."""

    gate: str
    holds: bool
    detail: str


class MessageExplanation(msgspec.Struct, frozen=True, kw_only=True,
                         forbid_unknown_fields=True):
    """The ``message explain`` document. ``held_by``: the first gate that holds the
    message (null: none does; a SCHEDULED message is then claimed by the next round).
    ``scheduler_waiting``: what the shard's last round said of the lane, if it waited."""

    delay_message_id: str
    shard: str
    lane: str
    state: str
    generation: int
    action_at: str
    deliver_at: str
    expire_at: str | None
    trusted_earliest: str | None
    trusted_latest: str | None
    held_by: str | None
    why: str
    gates: list[GateView]
    scheduler_waiting: str | None
    # its attempts in order, each "ATTEMPT_ID STATE: evidence" (a NOT_PUBLISHED a fence
    # proved names it: "fenced absence (file writer lock): ...")
    attempts: list[str] = msgspec.field(default_factory=list)


def request_of(body: object, kind: type[T]) -> T:
    """The request ``body`` (a decoded JSON object) as ``kind``; a UsageError naming the
    field that does not fit."""
    try:
        return msgspec.convert(body, kind)
    except msgspec.ValidationError as exc:
        raise UsageError(f"request body: {exc}") from None
