"""The dashboard driven with Textual's Pilot over fixed data: what it shows, where Enter
leads, the filter, and mutations behind a confirmation that requires a reason."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, Sparkline, Static

from nereus.tui.app import DashboardApp, make_app
from nereus.tui.mutations import LaneMutation
from nereus.tui.screens.lane import LaneScreen
from nereus.tui.screens.message import MessageScreen
from nereus.tui.screens.modals import ReasonModal
from nereus.tui.screens.overview import OverviewScreen
from nereus.tui.screens.shard import ShardScreen
from nereus.tui.widgets.status import EngineBanner, StatusLine
from nereus.tui.widgets.tables import (
    AttemptTable,
    FieldTable,
    LaneShardTable,
    LaneTable,
    MessageTable,
    ShardLaneTable,
    ShardTable,
)
from tests.tui.fakes import (
    SOCKET,
    UNCERTAIN_ATTEMPT,
    UNCERTAIN_MESSAGE,
    DownSource,
    FakeSource,
    RecordingRunner,
    message_document,
    snapshots,
)
from tests.tui.pilot import rows, run, toasts, until

TICKS = 5


def _app(source: FakeSource | None = None, runner: RecordingRunner | None = None,
         **options: Any) -> DashboardApp:
    return make_app(source or FakeSource(snapshots(TICKS)), runner or RecordingRunner(),
                    operator="tester", **options)


async def _loaded(pilot: Pilot[Any], app: DashboardApp) -> None:
    await until(pilot, lambda: app.state.history.ticks == TICKS, what="every fake snapshot")


async def _select_lane(pilot: Pilot[Any], app: DashboardApp, lane: str) -> None:
    table = app.screen.query_one(LaneTable)
    table.focus()
    index = [row.lane for row in table.rows_shown].index(lane)
    table.move_cursor(row=index)
    await until(pilot, lambda: table.selected is not None and table.selected.lane == lane,
                what=f"lane {lane} under the cursor")


def test_overview_shows_the_uncertain_attempt() -> None:
    """The UNKNOWN attempt is listed first as UNCERTAIN and counted in title and status."""
    async def scenario() -> None:
        app = _app()
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            table = app.screen.query_one(AttemptTable)
            first = rows(table)[0]
            assert first[:3] == ["UNCERTAIN", UNCERTAIN_MESSAGE, "local"]
            assert UNCERTAIN_ATTEMPT in first
            assert "UNCERTAIN 1" in str(table.border_title)
            assert "UNCERTAIN 1" in str(app.screen.query_one(StatusLine).render())
            assert [r[0] for r in rows(app.screen.query_one(ShardTable))] == [
                "default/0", "default/1"]
            lanes = rows(app.screen.query_one(LaneTable))
            assert lanes[1][:4] == ["payments", "CLOSED", "NOT_READY", "15"]
            assert lanes[1][-1] == "▂▄▅▇█"  # the due-backlog trend of five ticks
            assert not app.screen.query_one(EngineBanner).display
    run(scenario)


def test_a_lane_with_nothing_due_waiting_shows_no_lag_not_unknown() -> None:
    """`local` publishes as fast as its messages fall due (nothing due waits, so the engine
    gives no lag): its p99 lag reads 0ms, on the overview and on its screen, not "-"; the
    closed lane's due backlog shows its real lag."""
    async def scenario() -> None:
        app = _app()
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            table = app.screen.query_one(LaneTable)
            lag = list(LaneTable.COLUMNS).index("p99 lag")
            shown = {row[0]: row[lag] for row in rows(table)}
            assert shown == {"local": "0ms", "payments": "5.0s"}
            await _select_lane(pilot, app, "local")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, LaneScreen), what="lane screen")
            summary = str(app.screen.query_one("#summary", Static).render())
            assert "p99 lag 0ms" in summary and "max lag 0ms" in summary
    run(scenario)


def test_enter_on_a_lane_opens_the_lane_screen() -> None:
    """Select a lane row and press Enter: its screen, charts and breakdown; Escape returns."""
    async def scenario() -> None:
        app = _app()
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            await _select_lane(pilot, app, "payments")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, LaneScreen), what="lane screen")
            screen = app.screen
            assert isinstance(screen, LaneScreen) and screen.lane == "payments"
            summary = str(screen.query_one("#summary", Static).render())
            assert "CLOSED" in summary
            # the scheduled, not-yet-due messages and the due ones by why they wait
            assert "admissionGate CLOSED 15" in summary and "not due 4" in summary
            assert list(screen.query_one("#backlog-chart", Sparkline).data or []) == [
                3, 6, 9, 12, 15]
            assert [r[:3] for r in rows(screen.query_one(LaneShardTable))] == [
                ["default/0", "CLOSED", "10"], ["default/1", "CLOSED", "5"]]
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, OverviewScreen), what="overview")
    run(scenario)


def test_enter_on_an_attempt_opens_its_message() -> None:
    """Enter on the UNCERTAIN attempt loads GET /v1/messages/<id> on its route."""
    async def scenario() -> None:
        source = FakeSource(snapshots(TICKS))
        app = _app(source)
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            app.screen.query_one(AttemptTable).focus()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, MessageScreen)
                        and app.screen.query_one(FieldTable).row_count > 0, what="message")
            assert source.message_calls == [(UNCERTAIN_MESSAGE, "default")]
            fields = dict((r[0], r[1]) for r in rows(app.screen.query_one(FieldTable)))
            assert fields["state"] == "UNCERTAIN" and fields["key"] == "customer-19"
            assert rows(app.screen.query_one(AttemptTable))[0][0] == "UNCERTAIN"
            # why it waits, as `message explain` says it
            why = str(app.screen.query_one("#message-why", Static).render())
            assert why == "held by lane_gate: CLOSED: set by carol (position 9): INC-7"
    run(scenario)


def test_enter_on_a_shard_opens_the_shard_screen() -> None:
    """The shard screen lists each lane's gate on that shard and the shard's messages."""
    async def scenario() -> None:
        app = _app()
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            await pilot.press("enter")  # the shards table has the focus at start
            await until(pilot, lambda: isinstance(app.screen, ShardScreen)
                        and app.screen.query_one(MessageTable).row_count == 1,
                        what="shard screen with its messages")
            screen = app.screen
            assert isinstance(screen, ShardScreen) and screen.shard == "default/0"
            assert [r[:2] for r in rows(screen.query_one(ShardLaneTable))] == [
                ["local", "OPEN"], ["payments", "CLOSED"]]
            assert rows(screen.query_one(MessageTable))[0][0] == UNCERTAIN_MESSAGE
    run(scenario)


def test_close_lane_needs_a_reason_and_cancel_runs_nothing() -> None:
    """`c` asks for a reason; an empty one is refused, Escape and Cancel change nothing,
    and confirming with a reason runs exactly one mutation with that lane and reason."""
    async def scenario() -> None:
        runner = RecordingRunner()
        app = _app(runner=runner)
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            await _select_lane(pilot, app, "local")
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ReasonModal), what="modal")
            await pilot.press("enter")  # no reason yet
            assert isinstance(app.screen, ReasonModal)
            assert "reason is required" in str(
                app.screen.query_one("#reason-problem", Static).render())
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, OverviewScreen), what="overview")
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ReasonModal), what="modal")
            await pilot.click("#cancel")
            await until(pilot, lambda: isinstance(app.screen, OverviewScreen), what="overview")
            assert runner.calls == []

            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ReasonModal), what="modal")
            await pilot.press(*"broker maintenance")
            await pilot.press("enter")
            await until(pilot, lambda: any(title == "lane close local"
                                           for _, title, _ in toasts(app)),
                        what="the mutation's notification")
            assert runner.calls == [LaneMutation(action="close", lane="local",
                                                 reason="broker maintenance")]
            assert ("information", "lane close local",
                    "QUEUED; receipts default/0@1300, default/1@990; as tester") in toasts(app)
    run(scenario)


def test_open_lane_from_the_lane_screen() -> None:
    """`o` on a lane's own screen opens that lane, after the same confirmation."""
    async def scenario() -> None:
        runner = RecordingRunner()
        app = _app(runner=runner)
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            await _select_lane(pilot, app, "payments")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, LaneScreen), what="lane screen")
            await pilot.press("o")
            await until(pilot, lambda: isinstance(app.screen, ReasonModal), what="modal")
            app.screen.query_one("#reason", Input).value = "broker back"
            await pilot.click("#confirm")
            await until(pilot, lambda: runner.calls, what="the mutation")
            assert runner.calls == [LaneMutation(action="open", lane="payments",
                                                 reason="broker back")]
            assert isinstance(app.screen, LaneScreen)
    run(scenario)


def test_read_only_turns_the_mutation_keys_off() -> None:
    """With --read-only, `c` shows a notice and never asks or runs anything."""
    async def scenario() -> None:
        runner = RecordingRunner()
        app = _app(runner=runner, read_only=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            await _select_lane(pilot, app, "local")
            await pilot.press("c")
            await until(pilot, lambda: toasts(app), what="the read-only notice")
            assert isinstance(app.screen, OverviewScreen) and runner.calls == []
            assert "read-only" in toasts(app)[0][2]
    run(scenario)


def test_filter_narrows_every_table() -> None:
    """`/` focuses the filter; typing keeps matching rows only; Escape clears it."""
    async def scenario() -> None:
        app = _app()
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            await pilot.press("slash")
            focused = app.focused
            assert isinstance(focused, Input) and focused.id == "filter"
            await pilot.press(*"payments")
            screen = app.screen
            await until(pilot, lambda: screen.query_one(LaneTable).row_count == 1,
                        what="lanes filtered")
            assert rows(screen.query_one(LaneTable))[0][0] == "payments"
            assert screen.query_one(ShardTable).row_count == 0
            assert screen.query_one(AttemptTable).row_count == 0
            assert screen.query_one(LaneTable).border_title == "Lanes 1/2"
            await pilot.press("escape")
            await until(pilot, lambda: screen.query_one(LaneTable).row_count == 2,
                        what="filter cleared")
            assert screen.query_one("#filter", Input).value == ""
            await pilot.press("slash", *UNCERTAIN_MESSAGE, "enter")
            await until(pilot, lambda: screen.query_one(AttemptTable).row_count == 1,
                        what="attempts filtered by message id")
            assert isinstance(app.focused, ShardTable)
    run(scenario)


def test_every_screen_renders_at_80x24() -> None:
    """Overview, lane, shard and message screens and the modal fit 80x24: every table gets
    rows on screen and the footer stays on the last line."""
    async def scenario() -> None:
        app = _app()
        async with app.run_test(size=(80, 24)) as pilot:
            await _loaded(pilot, app)

            def fits() -> None:
                assert app.export_screenshot()
                for table in app.screen.query("DataTable"):
                    assert table.region.height >= 4, table
                    assert table.region.right <= 80 and table.region.bottom <= 23, table
                footer = app.screen.query_one("Footer")
                assert footer.region.y == 23

            fits()
            await _select_lane(pilot, app, "payments")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, LaneScreen), what="lane")
            fits()
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ReasonModal), what="modal")
            dialog = app.screen.query_one("#dialog")
            assert dialog.region.width <= 80 and dialog.region.height <= 24
            assert app.screen.query_one("#confirm").region.bottom <= 24
            await pilot.press("escape", "escape")
            await until(pilot, lambda: isinstance(app.screen, OverviewScreen), what="overview")
            app.screen.query_one(ShardTable).focus()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ShardScreen), what="shard")
            fits()
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, OverviewScreen), what="overview")
            app.screen.query_one(AttemptTable).focus()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, MessageScreen), what="message")
            fits()
    run(scenario)


def test_engine_down_says_where_and_how_to_start_it_and_keeps_retrying() -> None:
    """No engine: a banner names the socket and `nereus engine start`; it keeps trying."""
    async def scenario() -> None:
        source = DownSource()
        app = _app(source, retry_s=0.01)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: source.connects >= 3, what="three connection attempts")
            banner = app.screen.query_one(EngineBanner)
            assert banner.display
            text = str(banner.render())
            assert SOCKET in text and "start it with `nereus engine start`" in text
            assert "○ waiting" in str(app.screen.query_one(StatusLine).render())
    run(scenario)


def test_dashboard_recovers_when_the_engine_comes_up() -> None:
    """After failed attempts, the first snapshot hides the banner and fills the tables."""
    async def scenario() -> None:
        source = DownSource(snapshots(TICKS), failures=2)
        app = _app(source, retry_s=0.01)
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            assert not app.screen.query_one(EngineBanner).display
            assert app.screen.query_one(LaneTable).row_count == 2
            assert source.connects == 3
    run(scenario)


def test_a_message_id_no_row_matches_opens_that_message() -> None:
    """The filter's placeholder promises message ids: a scheduled message has no row (the
    tables list open attempts), so Enter on an id no row matches opens its message."""
    async def scenario() -> None:
        source = FakeSource(snapshots(TICKS),
                            messages={"scheduled-42": message_document("scheduled-42")})
        app = _app(source)
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(pilot, app)
            await pilot.press("slash", *"scheduled-42", "enter")
            await until(pilot, lambda: isinstance(app.screen, MessageScreen),
                        what="the message screen")
            await until(pilot, lambda: ("scheduled-42", "default") in source.message_calls,
                        what="the message asked for")
    run(scenario)
