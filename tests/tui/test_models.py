"""The dashboard's data layer: feed documents in, plain rows and numbers out (no Textual)."""

from __future__ import annotations

import msgspec
import pytest

from nereus.adapters.admin.admin_client import typed_answer
from nereus.adapters.admin.wire import EngineStatus
from nereus.errors import EngineUnreachable
from nereus.tui.formatting import fmt_backlog, fmt_int, fmt_ms, fmt_rate, spark_text
from nereus.tui.history import History, advance
from nereus.tui.models import (
    filter_rows,
    lanes_on_shard,
    message_detail,
)
from nereus.tui.source import Snapshot
from nereus.tui.state import DashboardState, with_outage, with_snapshot
from nereus.views import MessageDetail
from tests.tui.fakes import (
    UNCERTAIN_ATTEMPT,
    UNCERTAIN_MESSAGE,
    attempt_documents,
    attempts_of,
    message_document,
    snapshots,
    status_document,
    status_of,
)


def _fold(count: int) -> DashboardState:
    state = DashboardState()
    for snapshot in snapshots(count):
        state = with_snapshot(state, snapshot)
    return state


def test_overview_rows_carry_every_field_the_tables_show() -> None:
    """Shards, lanes and attempts become rows with the engine's values."""
    overview = _fold(1).overview
    assert overview is not None
    shard = overview.shard("default/1")
    assert shard is not None
    assert (shard.state, shard.applied_position, shard.lag, shard.due_backlog) == (
        "ACTIVE", 981, 3, 1)
    lane = overview.lane("payments")
    assert lane is not None and lane.closed
    assert (lane.readiness, lane.not_ready_reason, lane.due_lag_p99_ms, lane.failures) == (
        "NOT_READY", "broker timeout", 1000, 2)
    assert [part.shard for part in lane.shards] == ["default/0", "default/1"]
    assert overview.trusted_earliest == "2026-11-29T12:00:01.000Z"
    assert overview.routes == ("default",)


def test_uncertain_attempts_come_first_and_are_counted() -> None:
    """UNKNOWN attempts are the operator's problem: listed first and counted as UNCERTAIN."""
    overview = _fold(1).overview
    assert overview is not None
    assert [a.attempt_id for a in overview.attempts] == [UNCERTAIN_ATTEMPT, "a1b2c3d4e5f60718-29"]
    assert overview.attempts[0].uncertain and not overview.attempts[1].uncertain
    assert (overview.uncertain_count, overview.obligations_count) == (1, 2)


def test_counts_come_from_the_counters_and_a_capped_backlog_reads_at_least() -> None:
    """The engine sends only the first page of open attempts: UNCERTAIN and obligations
    are counted from the shards' and lanes' counters; a backlog the engine counted only up
    to its cap carries ``due_backlog_capped`` and prints with a ``+``."""
    status = dict(status_document(1))
    status["shards"] = [{**shard, "uncertain": 40, "due_backlog": 10_000,
                         "due_backlog_capped": True} for shard in status["shards"]]
    status["lanes"] = [{**lane, "open_attempts": 45, "due_backlog_capped": True}
                       for lane in status["lanes"]]
    state = with_snapshot(DashboardState(), Snapshot(
        status=status_of(status), attempts=attempts_of(attempt_documents())))
    overview = state.overview
    assert overview is not None
    assert len(overview.attempts) == 2
    assert overview.uncertain_count == 40 * len(overview.shards)
    assert overview.obligations_count == 45 * len(overview.lanes)
    shard = overview.shards[0]
    assert shard.due_backlog_capped and fmt_backlog(shard.due_backlog, True) == "10,000+"
    assert overview.lanes[0].due_backlog_capped
    assert fmt_backlog(7, False) == "7" and fmt_backlog(None, True) == "-"


def test_rates_come_from_counter_differences_over_engine_time() -> None:
    """Admissions per second = counter delta / Trusted UTC delta, never the local clock."""
    state = _fold(3)
    overview = state.overview
    assert overview is not None
    shard, lane = overview.shard("default/0"), overview.lane("local")
    assert shard is not None and shard.admission_rate == 3.0
    assert lane is not None and lane.admission_rate == 5.0
    assert state.history.lane_backlog["payments"] == (3, 6, 9)
    assert state.history.lane_rate_series["local"] == (0.0, 5.0, 5.0)


def test_first_document_and_counter_resets_have_no_rate() -> None:
    """One sample has no rate; a counter that goes down (engine restart) restarts it."""
    first = advance(History(), status_of(status_document(5)))
    assert first.shard_rates["default/0"] is None
    restarted = advance(first, status_of(status_document(1) | {"trusted_time": {
        "earliest": "2026-11-29T12:00:06.000Z", "latest": "2026-11-29T12:00:06.040Z",
        "uncertainty_ms": 40}}))
    assert restarted.shard_rates["default/0"] is None
    assert restarted.ticks == 2


def test_history_keeps_a_bounded_series() -> None:
    """Chart series keep the last ``keep`` samples only."""
    history = History()
    for tick in range(1, 8):
        history = advance(history, status_of(status_document(tick)), keep=4)
    assert history.lane_backlog["payments"] == (12, 15, 18, 21)


def test_a_document_of_another_engine_version_is_refused_naming_it() -> None:
    """The dashboard reads the wire's typed documents: one that does not fit (an engine of
    another version, missing a field) is refused with the path, the field and the way out,
    never drawn half-read."""
    status = {"shards": [{"shard": "default/0", "state": "ACTIVE"}], "lanes": []}
    with pytest.raises(EngineUnreachable, match=r"/v1/feed is not what this client reads"
                       ) as refused:
        typed_answer(status, EngineStatus, "/v1/feed")
    assert refused.value.hint is not None and "another version" in refused.value.hint


def test_outage_keeps_the_last_overview_and_counts_attempts() -> None:
    """Losing the feed keeps the data (shown stale) and counts reconnection attempts."""
    state = _fold(2)
    down = with_outage(with_outage(state, "gone", "start it"), "gone", "start it")
    assert down.overview == state.overview
    assert not down.connection.connected and down.connection.failures == 2
    back = with_snapshot(down, snapshots(3)[2])
    assert back.connection.connected and back.connection.failures == 0


def test_filter_keeps_rows_containing_every_term() -> None:
    """The filter matches every whitespace-separated term, in any case, anywhere in a row."""
    overview = _fold(1).overview
    assert overview is not None
    assert [row.lane for row in filter_rows(overview.lanes, "PAY")] == ["payments"]
    assert [row.lane for row in filter_rows(overview.lanes, "closed kafka")] == ["payments"]
    assert filter_rows(overview.lanes, "closed file") == []
    assert len(filter_rows(overview.attempts, "uncertain")) == 1
    assert len(filter_rows(overview.shards, "  ")) == 2


def test_lanes_on_shard_reads_each_lanes_breakdown() -> None:
    """The shard screen's lane table comes from the lanes' per-shard entries."""
    overview = _fold(2).overview
    assert overview is not None
    rows = lanes_on_shard(overview, "default/1")
    assert [(r.lane, r.gate, r.due_backlog) for r in rows] == [
        ("local", "OPEN", 0), ("payments", "CLOSED", 2)]


def test_message_detail_labels_fields_and_lists_attempts() -> None:
    """GET /v1/messages/<id> becomes labelled fields and attempt rows on its shard."""
    detail = message_detail(msgspec.convert(message_document(), MessageDetail))
    assert detail.delay_message_id == UNCERTAIN_MESSAGE and detail.state == "UNCERTAIN"
    fields = dict(detail.fields)
    assert fields["state"] == "UNCERTAIN" and fields["expire at"] == "-"
    assert fields["header trace"] == "t-1"
    assert [(a.attempt_id, a.shard, a.uncertain) for a in detail.attempts] == [
        (UNCERTAIN_ATTEMPT, "default/0", True)]
    assert len(attempt_documents()) == 2


def test_formatting_is_short_and_marks_unknowns() -> None:
    """Numbers read the same everywhere; '-' means the engine did not say."""
    assert [fmt_ms(v) for v in (None, 850, 3_200, 245_000, 7_800_000, 273_600_000)] == [
        "-", "850ms", "3.2s", "4m05s", "2h10m", "3d04h"]
    assert (fmt_int(None), fmt_int(1234567), fmt_rate(None), fmt_rate(2.25)) == (
        "-", "1,234,567", "-", "2.2/s")


def test_spark_text_scales_to_the_maximum_and_keeps_the_tail() -> None:
    """The text sparkline is scaled to its own maximum and shows the newest values."""
    assert spark_text([0, 0, 0], 5) == "▁▁▁"
    assert spark_text([1, 2, 4, 8], 4) == "▂▃▅█"
    assert spark_text([0, 20, 60, 100], 3) == "▂▅█"
    assert spark_text([], 4) == ""
