"""The cluster: its nodes (alive, leader, draining, the shards each holds), every shard's
owner, epoch, state and placement, and the moves in progress.

It reads the coordinator itself (``ClusterSource``), once a second, on a thread worker it
owns: the reads run only while the screen is shown, and a coordinator that does not answer
never holds the keyboard. A home that is not a cluster node has nothing to read; the screen
says so. Escape goes back.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Header, Static
from textual.worker import get_current_worker

from nereus.tui.cluster_feed import follow_cluster
from nereus.tui.cluster_models import (
    ClusterPanel,
    build_cluster_overview,
    with_failure,
    with_overview,
)
from nereus.tui.cluster_source import ClusterReading, ClusterSource
from nereus.tui.events import ClusterLost, ClusterUpdated
from nereus.tui.host import DashboardHost
from nereus.tui.widgets.cluster import MoveTable, NodeTable, OwnershipTable, cluster_heading

NOT_A_NODE = (
    "This home is not a cluster node: its nereus.toml has no [cluster] table, so there is "
    "no coordinator to read and no cluster to show.\n"
    "A node's home is made with `nereus init --join URL --node-id ID`; "
    "`nereus cluster status --coordinator URL` reads a cluster from anywhere.")


class ClusterScreen(Screen[None]):
    AUTO_FOCUS = "#cluster-shards"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, host: DashboardHost) -> None:
        super().__init__()
        self.source: ClusterSource | None = host.cluster
        self.interval_s = host.cluster_interval_s
        self.panel = ClusterPanel()

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="cluster-heading")
        yield NodeTable(title="Nodes", id="cluster-nodes")
        yield OwnershipTable(title="Shards", id="cluster-shards")
        yield MoveTable(title="Moves in progress", id="cluster-moves")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "cluster"
        if self.source is None:
            self.query_one("#cluster-heading", Static).update(Text(NOT_A_NODE))
            for table in (NodeTable, OwnershipTable, MoveTable):
                self.query_one(table).display = False
            return
        self.draw()
        self.run_worker(self._follow, thread=True, group="cluster", name="cluster",
                        exclusive=True)

    def _follow(self) -> None:
        source = self.source
        assert source is not None  # started only when there is one
        node_id = source.node_id

        def read(reading: ClusterReading) -> None:
            self.post_message(ClusterUpdated(build_cluster_overview(reading,
                                                                    this_node=node_id)))

        follow_cluster(source, on_reading=read,
                       on_lost=lambda problem, hint: self.post_message(ClusterLost(problem, hint)),
                       stop=get_current_worker().cancelled_event, interval_s=self.interval_s)

    def on_cluster_updated(self, event: ClusterUpdated) -> None:
        self.panel = with_overview(event.overview)
        self.draw()

    def on_cluster_lost(self, event: ClusterLost) -> None:
        self.panel = with_failure(self.panel, event.problem, event.hint)
        self.draw()

    def draw(self) -> None:
        if self.source is None:
            return
        self.query_one("#cluster-heading", Static).update(
            cluster_heading(self.panel, self.source.where, self.interval_s))
        overview = self.panel.overview
        if overview is None:
            return
        nodes = self.query_one(NodeTable)
        nodes.show(overview.nodes)
        alive = sum(1 for node in overview.nodes if node.alive)
        nodes.border_title = f"Nodes {len(overview.nodes)} · alive {alive}"
        shards = self.query_one(OwnershipTable)
        shards.show(overview.shards)
        shards.border_title = f"Shards {len(overview.shards)}"
        moves = self.query_one(MoveTable)
        moves.show(overview.moves)
        moves.border_title = (f"Moves in progress {len(overview.moves)}" if overview.moves
                              else "Moves in progress: none")
