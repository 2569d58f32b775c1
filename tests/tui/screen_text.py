"""Everything the dashboard shows, as text, for tests that hold it to a run's secrets.

``tour`` visits every screen of a running dashboard (the overview, each shard, each lane,
the given messages, the cluster) and returns what each showed: the screen as the terminal
draws it, plus every table's cells, every text widget's content and the toasts in full (a
narrow column cuts a long value short on screen; its cell holds all of it).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable, Static

from nereus.tui.admin_source import AdminSource
from nereus.tui.app import DashboardApp, make_app
from nereus.tui.cluster_source import CoordinatorSource
from nereus.tui.mutations import CliMutationRunner
from nereus.tui.screens.base import DrillDownScreen
from nereus.tui.screens.cluster import ClusterScreen
from nereus.tui.screens.lane import LaneScreen
from nereus.tui.screens.message import MessageScreen
from nereus.tui.screens.shard import ShardScreen
from nereus.tui.widgets.tables import MessageTable
from tests.tui.pilot import rows, run, toasts, until


def drawn(app: DashboardApp) -> str:
    """The current screen as the terminal shows it, in plain text (what
    ``App.export_screenshot`` draws, exported as text instead of SVG)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True,
                      force_terminal=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text()


def contents(app: DashboardApp, screen: Screen[Any]) -> str:
    """Every cell of every table, every text widget's content, the screen's titles and
    the toasts, uncut."""
    parts = [str(screen.title), str(screen.sub_title)]
    for table in screen.query(DataTable):
        parts.append(str(table.border_title))
        parts += ["\t".join(row) for row in rows(table)]
    parts += [str(widget.render()) for widget in screen.query(Static)]
    parts += [" ".join(toast) for toast in toasts(app)]
    return "\n".join(parts)


def look(app: DashboardApp) -> str:
    return drawn(app) + "\n" + contents(app, app.screen)


def _messages_loaded(screen: DrillDownScreen) -> bool:
    title = str(screen.query_one(MessageTable).border_title)
    return title.startswith(("Messages (", "Messages —"))


async def _visit(pilot: Pilot[Any], app: DashboardApp, screen: Screen[Any],
                 shown: Any, what: str) -> str:
    """Push ``screen``, wait for ``shown()`` (its data arrived), look, go back."""
    await app.push_screen(screen)
    await until(pilot, shown, what=what, timeout=30)
    seen = look(app)
    app.pop_screen()
    await pilot.pause()
    return seen


async def tour(pilot: Pilot[Any], app: DashboardApp, *, lanes: Sequence[str],
               messages: Sequence[tuple[str, str]] = (), cluster: bool = False,
               ) -> dict[str, str]:
    """What each screen showed, by screen: the overview once ``lanes`` are in it, every
    shard and lane screen once its messages loaded, each ``(delay_message_id, route)``'s
    message screen once loaded, and with ``cluster`` the cluster screen after its first
    read (or failed read)."""
    def listed() -> bool:
        overview = app.state.overview
        return overview is not None and set(lanes) <= {lane.lane for lane in overview.lanes}

    await until(pilot, listed, what=f"lanes {', '.join(lanes)} on the overview", timeout=30)
    seen = {"overview": look(app)}
    overview = app.state.overview
    assert overview is not None
    for shard in overview.shards:
        drill: DrillDownScreen = ShardScreen(app, shard.shard)
        seen[f"shard {shard.shard}"] = await _visit(
            pilot, app, drill, lambda d=drill: _messages_loaded(d), f"shard {shard.shard}")
    for lane in overview.lanes:
        drill = LaneScreen(app, lane.lane)
        seen[f"lane {lane.lane}"] = await _visit(
            pilot, app, drill, lambda d=drill: _messages_loaded(d), f"lane {lane.lane}")
    for delay_message_id, route in messages:
        message = MessageScreen(app, delay_message_id, route)
        seen[f"message {delay_message_id}"] = await _visit(
            pilot, app, message, lambda m=message: "loading…" not in str(
                m.query_one("#message-head", Static).render()), f"message {delay_message_id}")
    if cluster:
        screen = ClusterScreen(app)
        seen["cluster"] = await _visit(pilot, app, screen, lambda: screen.panel.overview
                                       is not None, "the cluster's first read")
    return seen


def tour_home(home: Path, *, lanes: Sequence[str], messages: Sequence[tuple[str, str]] = (),
              ) -> dict[str, str]:
    """``tour`` of the dashboard over ``home``'s running engine, built as ``nereus
    dashboard`` builds it (a node's home: its coordinator, reached with the settings of its
    ``[cluster]``, and the cluster screen in the tour)."""
    from nereus.adapters.cluster.home_config import load_home_config

    settings = load_home_config(home / "nereus.toml").cluster
    cluster = None if settings is None else CoordinatorSource(settings.coordinator,
                                                              node_id=settings.node_id)
    seen: dict[str, str] = {}

    async def scenario() -> None:
        app = make_app(AdminSource(home / "run" / "admin.sock"), CliMutationRunner(home),
                       cluster=cluster, cluster_interval_s=0.2)
        async with app.run_test(size=(200, 60)) as pilot:
            seen.update(await tour(pilot, app, lanes=lanes, messages=messages,
                                   cluster=cluster is not None))

    run(scenario)
    return seen


def cluster_screen(home: Path, url: str, node_id: str) -> str:
    """The dashboard's cluster screen over the coordinator at ``url`` (reached with the
    settings this process was given for it) after its first read or failed read, the
    engine of ``home`` not running: what an operator sees when the coordinator refuses."""
    seen: list[str] = []

    async def scenario() -> None:
        app = make_app(AdminSource(home / "run" / "admin.sock"), CliMutationRunner(home),
                       cluster=CoordinatorSource(url, node_id=node_id), retry_s=0.2,
                       cluster_interval_s=0.2)
        async with app.run_test(size=(200, 60)) as pilot:
            screen = ClusterScreen(app)
            seen.append(await _visit(pilot, app, screen, lambda: screen.panel.overview
                                     is not None or screen.panel.failures > 0,
                                     "the cluster's first read"))

    run(scenario)
    return seen[0]
