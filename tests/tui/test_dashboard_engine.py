"""The dashboard against a real engine: the admin socket feed fills the tables, a message
opens from the real API, and the mutation keys run the real ``nereus lane close|open``.

One engine for the module (a fresh two-shard home with the ``local`` lane), started and
stopped as an operator would (``tests.daemon.running_engine``). Every wait is a condition
with a deadline.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from nereus.tui.admin_source import AdminSource
from nereus.tui.app import DashboardApp, make_app
from nereus.tui.mutations import CliMutationRunner
from nereus.tui.screens.message import MessageScreen
from nereus.tui.screens.modals import MessagePrompt, ReasonModal
from nereus.tui.widgets.status import EngineBanner
from nereus.tui.widgets.tables import FieldTable, LaneTable, ShardTable
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.tui.pilot import rows, run, toasts, until

MESSAGE_ID = "dashboard-probe-1"


@pytest.fixture(scope="module")
def engine_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("dashboard") / "home"
    assert run_nereus("init", "--partitions", "2", home=home).code == 0
    with running_engine(home):
        scheduled = run_nereus("message", "schedule", "--lane", "local", "--delay", "1h",
                               "--payload", "probe", "--id", MESSAGE_ID, "--wait", home=home)
        assert scheduled.code == 0, scheduled.stderr
        yield home


def _app(home: Path) -> DashboardApp:
    return make_app(AdminSource(home / "run" / "admin.sock"), CliMutationRunner(home))


def _lane_gate(app: DashboardApp, lane: str) -> str | None:
    found = [r for r in rows(app.screen.query_one(LaneTable)) if r[0] == lane]
    return found[0][1] if found else None


async def _shown(pilot: Pilot[Any], app: DashboardApp) -> None:
    await until(pilot, lambda: _lane_gate(app, "local") is not None
                and [r[0] for r in rows(app.screen.query_one(ShardTable))] == [
                    "default/0", "default/1"], what="the engine's lane and shards", timeout=15)


def test_feed_fills_the_overview_with_the_configured_lane_and_shards(engine_home: Path) -> None:
    """Within seconds the lane from nereus.toml and both shards appear, ACTIVE and live."""
    async def scenario() -> None:
        app = _app(engine_home)
        async with app.run_test(size=(120, 40)) as pilot:
            await _shown(pilot, app)
            assert _lane_gate(app, "local") in ("OPEN", "CLOSED")
            assert {r[1] for r in rows(app.screen.query_one(ShardTable))} == {"ACTIVE"}
            assert not app.screen.query_one(EngineBanner).display
            assert app.state.connection.connected
    run(scenario)


def test_a_lane_that_publishes_shows_its_lag_not_unknown(engine_home: Path) -> None:
    """While messages fall due and publish, the lane's p99 lag is a duration on every
    refresh (0ms when nothing due waits), never "-"."""
    async def scenario() -> None:
        app = _app(engine_home)
        async with app.run_test(size=(120, 40)) as pilot:
            await _shown(pilot, app)
            before = app.state.history.ticks
            for n in range(5):
                queued = run_nereus("message", "schedule", "--lane", "local", "--delay", "0s",
                                    "--payload", "lag", "--id", f"lag-probe-{n}",
                                    home=engine_home)
                assert queued.code == 0, queued.stderr
            lag = list(LaneTable.COLUMNS).index("p99 lag")
            seen: list[str] = []

            def refreshed() -> bool:
                found = [r[lag] for r in rows(app.screen.query_one(LaneTable))
                         if r[0] == "local"]
                seen.extend(found)
                return app.state.history.ticks >= before + 3

            await until(pilot, refreshed, what="three refreshes of the feed", timeout=30)
            assert seen and "-" not in seen, seen
            assert all(cell.endswith(("ms", "s")) for cell in seen), seen
    run(scenario)


def test_a_message_opens_from_the_real_api(engine_home: Path) -> None:
    """`m` + an id loads GET /v1/messages/<id>: the scheduled probe, on lane local."""
    async def scenario() -> None:
        app = _app(engine_home)
        async with app.run_test(size=(120, 40)) as pilot:
            await _shown(pilot, app)
            await pilot.press("m")
            await until(pilot, lambda: isinstance(app.screen, MessagePrompt), what="prompt")
            await pilot.press(*MESSAGE_ID, "enter")
            await until(pilot, lambda: isinstance(app.screen, MessageScreen)
                        and app.screen.query_one(FieldTable).row_count > 0,
                        what="the message's fields", timeout=15)
            fields = dict((r[0], r[1]) for r in rows(app.screen.query_one(FieldTable)))
            assert (fields["state"], fields["lane"]) == ("SCHEDULED", "local")
    run(scenario)


def test_no_engine_shows_the_socket_and_how_to_start_it(tmp_path: Path) -> None:
    """Against a home with no engine the real source reports the socket path and hint."""
    async def scenario() -> None:
        socket = tmp_path / "run" / "admin.sock"
        app = make_app(AdminSource(socket), CliMutationRunner(tmp_path), retry_s=0.05)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.state.connection.failures >= 2,
                        what="two failed connections")
            text = str(app.screen.query_one(EngineBanner).render())
            assert str(socket) in text and "start it with `nereus engine start`" in text
    run(scenario)


def test_close_and_open_run_the_real_cli(engine_home: Path) -> None:
    """`c` + reason runs `nereus lane close`: the gate turns CLOSED in the feed and the
    CLI's answer is shown; `o` + reason opens it again."""
    async def scenario() -> None:
        app = _app(engine_home)
        async with app.run_test(size=(120, 40)) as pilot:
            await _shown(pilot, app)
            assert _lane_gate(app, "local") == "OPEN"
            table = app.screen.query_one(LaneTable)
            table.focus()
            table.move_cursor(row=[r.lane for r in table.rows_shown].index("local"))
            for action, key, gate in (("close", "c", "CLOSED"), ("open", "o", "OPEN")):
                await pilot.press(key)
                await until(pilot, lambda: isinstance(app.screen, ReasonModal), what="modal")
                app.screen.query_one("#reason", Input).value = f"dashboard test {action}"
                await pilot.press("enter")
                def gate_shown(gate: str = gate) -> bool:
                    return _lane_gate(app, "local") == gate

                def answered(action: str = action) -> bool:
                    return any(title == f"lane {action} local" for _, title, _ in toasts(app))

                await until(pilot, gate_shown, what=f"lane local {gate} in the feed", timeout=30)
                await until(pilot, answered, what=f"the answer of `lane {action}`", timeout=30)
                (severity, _, text), = [t for t in toasts(app) if t[1] == f"lane {action} local"]
                assert severity == "information", text
                assert "receipts default/0@" in text and "default/1@" in text
    run(scenario)
