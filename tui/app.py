"""The dashboard app: one data source, one mutation runner, one state, a stack of screens.

The app owns the only long-lived worker (the feed thread, ``nereus.tui.feed``) and the
short mutation workers; it folds feed events into its ``DashboardState`` and asks each
live screen to redraw. Everything else lives in the screens, widgets and the pure data
layer (``models``, ``history``, ``state``). Build it with ``make_app``.
"""

from __future__ import annotations

import getpass
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import get_current_worker

from nereus.tui.cluster_source import ClusterSource
from nereus.tui.events import FeedLost, FeedUpdated, MutationFinished
from nereus.tui.feed import follow_feed
from nereus.tui.mutations import LaneAction, LaneMutation, MutationRunner, describe_outcome
from nereus.tui.screens.base import LiveScreen
from nereus.tui.screens.modals import ReasonModal
from nereus.tui.screens.overview import OverviewScreen
from nereus.tui.source import DashboardSource
from nereus.tui.state import DashboardState, with_outage, with_snapshot


class DashboardApp(App[None]):
    TITLE = "Nereus Delay"
    SUB_TITLE = "dashboard"
    CSS_PATH = "dashboard.tcss"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit")]

    def __init__(self, source: DashboardSource, runner: MutationRunner, *, operator: str,
                 retry_s: float = 1.0, read_only: bool = False,
                 cluster: ClusterSource | None = None, cluster_interval_s: float = 1.0) -> None:
        super().__init__()
        self._source = source
        self._cluster = cluster
        self._cluster_interval_s = cluster_interval_s
        self.runner = runner
        self.operator = operator
        self._retry_s = retry_s
        self.read_only = read_only
        self._state = DashboardState()

    # the host protocol ------------------------------------------------------------------
    @property
    def state(self) -> DashboardState:
        return self._state

    @property
    def source(self) -> DashboardSource:
        return self._source

    @property
    def retry_s(self) -> float:
        return self._retry_s

    @property
    def cluster(self) -> ClusterSource | None:
        return self._cluster

    @property
    def cluster_interval_s(self) -> float:
        return self._cluster_interval_s

    # life -------------------------------------------------------------------------------
    def get_default_screen(self) -> Screen[None]:
        return OverviewScreen(self)

    def on_mount(self) -> None:
        self.run_worker(self._follow_feed, thread=True, group="feed", name="feed",
                        exclusive=True)

    def _follow_feed(self) -> None:
        follow_feed(self._source,
                    on_snapshot=lambda snapshot: self.post_message(FeedUpdated(snapshot)),
                    on_lost=lambda problem, hint: self.post_message(FeedLost(problem, hint)),
                    stop=get_current_worker().cancelled_event, retry_s=self._retry_s)

    def on_feed_updated(self, event: FeedUpdated) -> None:
        self._state = with_snapshot(self._state, event.snapshot)
        self._redraw()

    def on_feed_lost(self, event: FeedLost) -> None:
        self._state = with_outage(self._state, event.problem, event.hint)
        self._redraw()

    def _redraw(self) -> None:
        if not self.is_running:  # shutting down: screens are losing their widgets
            return
        for screen in self.screen_stack:
            if isinstance(screen, LiveScreen) and screen.ready:
                screen.show_state(self._state)

    # mutations --------------------------------------------------------------------------
    def request_lane_mutation(self, action: LaneAction, lane: str) -> None:
        if self.read_only:
            self.notify("started with --read-only: mutations are off", severity="warning",
                        markup=False)
            return

        def confirmed(reason: str | None) -> None:
            if reason is None:
                self.notify(f"lane {action} {lane}: cancelled, nothing was changed", markup=False)
                return
            self.notify(f"lane {action} {lane}: running…", markup=False)
            self._run_mutation(LaneMutation(action=action, lane=lane, reason=reason))

        self.push_screen(ReasonModal(action, lane, operator=self.operator), confirmed)

    @work(thread=True, group="mutation")
    def _run_mutation(self, mutation: LaneMutation) -> None:
        self.post_message(MutationFinished(self.runner.run(mutation)))

    def on_mutation_finished(self, event: MutationFinished) -> None:
        severity, title, text = describe_outcome(event.outcome)
        self.notify(text, title=title, severity=severity, timeout=10, markup=False)


def make_app(source: DashboardSource, runner: MutationRunner, *, operator: str | None = None,
             retry_s: float = 1.0, read_only: bool = False,
             cluster: ClusterSource | None = None,
             cluster_interval_s: float = 1.0) -> DashboardApp:
    """The dashboard over ``source``; mutations go through ``runner`` as ``operator``
    (default: the current user, the identity the CLI records). ``cluster`` is the
    coordinator of the home's cluster (None: the home is not a cluster node), read every
    ``cluster_interval_s`` while the cluster screen is shown."""
    return DashboardApp(source, runner, operator=operator or getpass.getuser(),
                        retry_s=retry_s, read_only=read_only, cluster=cluster,
                        cluster_interval_s=cluster_interval_s)
