"""View models: the engine's typed documents (``adapters/admin/wire.py``, ``views``)
turned into plain frozen rows the widgets draw.

Everything here is a pure function of its inputs (the feed documents and the history
fold), so what the dashboard shows is unit-testable without a terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from nereus import views
from nereus.adapters.admin.wire import LaneShardView, LaneView, ShardView
from nereus.tui.history import History
from nereus.tui.source import Snapshot


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardRow:
    """One shard as the overview shows it."""

    shard: str
    state: str
    epoch: int | None
    applied_position: int | None
    log_end_position: int | None
    lag: int | None
    due_backlog: int | None
    admissions: int | None
    admission_rate: float | None
    uncertain: int
    claims: int | None
    in_flight: int | None
    error: str | None
    due_backlog_capped: bool = False  # due_backlog is "at least" (the engine's cap)

    @property
    def key(self) -> str:
        return self.shard

    @property
    def route(self) -> str:
        return self.shard.rsplit("/", 1)[0]

    @property
    def search_text(self) -> str:
        return " ".join((self.shard, self.state, self.error or "",
                         "uncertain" if self.uncertain else ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneOnShardRow:
    """One lane's state on one shard: a row of the lane screen, which lists the lane's
    shards (``key`` is the shard), or of the shard screen, which lists the shard's lanes
    (``by_shard=False``: ``key`` is the lane)."""

    lane: str
    shard: str
    gate: str
    due_backlog: int | None
    open_attempts: int | None
    admissions: int | None
    by_shard: bool = True
    due_backlog_capped: bool = False

    @property
    def key(self) -> str:
        return self.shard if self.by_shard else self.lane

    @property
    def search_text(self) -> str:
        return f"{self.key} {self.gate}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneRow:
    """One destination lane, summed over shards, with its recent history."""

    lane: str
    destination: str | None
    gate: str
    readiness: str
    not_ready_reason: str | None
    due_backlog: int | None
    due_lag_p99_ms: int | None
    due_lag_max_ms: int | None
    in_flight: int | None
    open_attempts: int | None
    published: int | None
    failures: int | None
    admissions: int | None
    admission_rate: float | None
    messages_by_state: tuple[tuple[str, int], ...]
    shards: tuple[LaneOnShardRow, ...]
    backlog_history: tuple[int, ...]
    rate_history: tuple[float, ...]
    due_backlog_capped: bool = False  # due_backlog is "at least"; due_lag_p99_ms "at most"
    # unfinished messages by why they wait ("not due": scheduled, not yet due), most first
    waiting_by_reason: tuple[tuple[str, int], ...] = ()
    uncertain: int = 0  # attempts UNKNOWN; the oldest open this long (None: none)
    uncertain_oldest_age_ms: int | None = None
    fencing: str | None = None  # how it fences a dead owner's sends (None: it does not)

    @property
    def key(self) -> str:
        return self.lane

    @property
    def closed(self) -> bool:
        return self.gate == "CLOSED"

    @property
    def search_text(self) -> str:
        return " ".join((self.lane, self.destination or "", self.gate, self.readiness,
                         self.not_ready_reason or ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRow:
    """An open publish attempt (an open obligation); UNKNOWN ones are UNCERTAIN."""

    attempt_id: str
    attempt_no: int | None
    delay_message_id: str
    lane: str
    shard: str
    state: str
    admitted_at: str | None
    evidence: str | None
    owner_id: str | None

    @property
    def key(self) -> str:
        return self.attempt_id

    @property
    def uncertain(self) -> bool:
        return self.state == "UNKNOWN"

    @property
    def route(self) -> str:
        return self.shard.rsplit("/", 1)[0] if "/" in self.shard else "default"

    @property
    def search_text(self) -> str:
        return " ".join((self.attempt_id, self.delay_message_id, self.lane, self.shard,
                         self.state, "uncertain" if self.uncertain else "",
                         self.evidence or ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRow:
    """One message in a lane's or shard's message list."""

    delay_message_id: str
    shard: str
    lane: str
    state: str
    deliver_at: str | None
    retries: int | None

    @property
    def key(self) -> str:
        return self.delay_message_id

    @property
    def route(self) -> str:
        return self.shard.rsplit("/", 1)[0] if "/" in self.shard else "default"

    @property
    def search_text(self) -> str:
        return f"{self.delay_message_id} {self.shard} {self.lane} {self.state}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Overview:
    """Everything the overview screen shows for one feed tick."""

    owner_id: str | None
    home: str | None
    started_at: str | None
    trusted_earliest: str | None
    uncertainty_ms: int | None
    shards: tuple[ShardRow, ...]
    lanes: tuple[LaneRow, ...]
    attempts: tuple[AttemptRow, ...]

    @property
    def uncertain_count(self) -> int:
        """UNCERTAIN messages: the shards' counters (the attempts listed are only the first
        page of them)."""
        return sum(shard.uncertain for shard in self.shards)

    @property
    def obligations_count(self) -> int:
        """Open attempts: the lanes' counters, summed."""
        return sum(lane.open_attempts or 0 for lane in self.lanes)

    @property
    def routes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(shard.route for shard in self.shards))

    def lane(self, name: str) -> LaneRow | None:
        return next((lane for lane in self.lanes if lane.lane == name), None)

    def shard(self, name: str) -> ShardRow | None:
        return next((shard for shard in self.shards if shard.shard == name), None)


def shard_row(doc: ShardView, history: History) -> ShardRow:
    return ShardRow(
        shard=doc.shard, state=doc.state, epoch=doc.epoch,
        applied_position=doc.applied_position, log_end_position=doc.log_end_position,
        lag=doc.lag, due_backlog=doc.due_backlog, admissions=doc.admissions,
        admission_rate=history.shard_rates.get(doc.shard), uncertain=doc.uncertain,
        claims=doc.claims, in_flight=doc.in_flight, error=doc.error,
        due_backlog_capped=doc.due_backlog_capped,
    )


def _lane_on_shard(lane: str, part: LaneShardView) -> LaneOnShardRow:
    return LaneOnShardRow(lane=lane, shard=part.shard, gate=part.gate,
                          due_backlog=part.due_backlog, open_attempts=part.open_attempts,
                          admissions=part.admissions,
                          due_backlog_capped=part.due_backlog_capped)


def _most_first(counts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(counts.items(), key=lambda item: -item[1]))


def lane_row(doc: LaneView, history: History) -> LaneRow:
    name = doc.lane
    return LaneRow(
        lane=name, destination=doc.destination, gate=doc.gate, readiness=doc.readiness,
        not_ready_reason=doc.not_ready_reason, due_backlog=doc.due_backlog,
        due_lag_p99_ms=doc.due_lag_p99_ms, due_lag_max_ms=doc.due_lag_max_ms,
        in_flight=doc.in_flight, open_attempts=doc.open_attempts, published=doc.published,
        failures=doc.failures, admissions=doc.admissions,
        admission_rate=history.lane_rates.get(name),
        messages_by_state=tuple(sorted(doc.messages_by_state.items())),
        shards=tuple(_lane_on_shard(name, part) for part in doc.shards),
        backlog_history=history.lane_backlog.get(name, ()),
        rate_history=history.lane_rate_series.get(name, ()),
        due_backlog_capped=doc.due_backlog_capped,
        waiting_by_reason=_most_first(doc.waiting_by_reason),
        uncertain=doc.uncertain, uncertain_oldest_age_ms=doc.uncertain_oldest_age_ms,
        fencing=doc.fencing,
    )


def attempt_row(doc: views.AttemptView, shard: str) -> AttemptRow:
    return AttemptRow(
        attempt_id=doc.attempt_id, attempt_no=doc.attempt_no,
        delay_message_id=doc.delay_message_id, lane=doc.lane, shard=shard, state=doc.state,
        admitted_at=doc.admitted_at, evidence=doc.evidence, owner_id=doc.owner_id,
    )


def message_row(doc: views.MessageView) -> MessageRow:
    return MessageRow(delay_message_id=doc.delay_message_id, shard=doc.shard, lane=doc.lane,
                      state=doc.state, deliver_at=doc.deliver_at, retries=doc.retries)


def build_overview(snapshot: Snapshot, history: History) -> Overview:
    """The overview for one snapshot; ``history`` must already include this snapshot."""
    status = snapshot.status
    # UNCERTAIN first: they are the ones an operator must act on.
    attempts = sorted((attempt_row(doc, doc.shard) for doc in snapshot.attempts),
                      key=lambda row: (not row.uncertain, row.admitted_at or "", row.attempt_id))
    return Overview(
        owner_id=status.owner_id, home=status.home, started_at=status.started_at,
        trusted_earliest=status.trusted_time.earliest,
        uncertainty_ms=status.trusted_time.uncertainty_ms,
        shards=tuple(shard_row(doc, history) for doc in status.shards),
        lanes=tuple(lane_row(doc, history) for doc in status.lanes),
        attempts=tuple(attempts),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageDetail:
    """``GET /v1/messages/<id>`` as labelled fields plus the message's attempts."""

    delay_message_id: str
    state: str
    fields: tuple[tuple[str, str], ...]
    attempts: tuple[AttemptRow, ...]


_MESSAGE_FIELDS = (
    ("shard", "shard"), ("lane", "lane"), ("state", "state"), ("generation", "generation"),
    ("deliver at", "deliver_at"), ("action at", "action_at"), ("expire at", "expire_at"),
    ("key", "key"), ("payload bytes", "payload_bytes"), ("retries", "retries"),
    ("open attempt", "open_attempt_id"), ("detail", "detail"),
    ("created at position", "created_position"), ("updated at position", "updated_position"),
    ("applied position", "applied_position"), ("log end position", "log_end_position"),
    ("conclusive", "conclusive"),
)


def message_detail(doc: views.MessageDetail) -> MessageDetail:
    fields = [(label, "-" if getattr(doc, name) is None else str(getattr(doc, name)))
              for label, name in _MESSAGE_FIELDS]
    fields.extend((f"header {name}", value) for name, value in sorted(doc.headers.items()))
    return MessageDetail(delay_message_id=doc.delay_message_id, state=doc.state,
                         fields=tuple(fields),
                         attempts=tuple(attempt_row(a, doc.shard) for a in doc.attempts))


class Searchable(Protocol):
    @property
    def search_text(self) -> str: ...


RowT = TypeVar("RowT", bound=Searchable)


def filter_rows(rows: Iterable[RowT], query: str) -> list[RowT]:
    """Rows whose text contains every whitespace-separated term of ``query`` (any case)."""
    terms = query.lower().split()
    return [row for row in rows
            if all(term in row.search_text.lower() for term in terms)]


def attempts_of(rows: Sequence[AttemptRow], *, lane: str | None = None,
                shard: str | None = None) -> list[AttemptRow]:
    return [row for row in rows
            if (lane is None or row.lane == lane) and (shard is None or row.shard == shard)]


def lanes_on_shard(overview: Overview, shard: str) -> list[LaneOnShardRow]:
    """Each lane's gate, backlog and attempts on one shard (from the lanes' breakdowns)."""
    return [replace(part, by_shard=False)
            for lane in overview.lanes for part in lane.shards if part.shard == shard]
