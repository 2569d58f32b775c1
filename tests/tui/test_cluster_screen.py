"""The cluster screen driven with Textual's Pilot over fixed coordinator views: nodes and
ownership, moves in progress set apart, the refresh that follows a move to its end, a
coordinator that stops answering, and a home that is not a cluster node."""

from __future__ import annotations

from textual.widgets import Static

from nereus.tui.app import DashboardApp, make_app
from nereus.tui.screens.cluster import ClusterScreen
from nereus.tui.screens.overview import OverviewScreen
from nereus.tui.widgets.cluster import MoveTable, NodeTable, OwnershipTable
from tests.tui.cluster_fakes import COORDINATOR, FakeClusterSource, moving_view, settled_view
from tests.tui.fakes import FakeSource, RecordingRunner, snapshots
from tests.tui.pilot import rows, run, until


def _app(cluster: FakeClusterSource | None) -> DashboardApp:
    return make_app(FakeSource(snapshots(1)), RecordingRunner(), operator="tester",
                    cluster=cluster, cluster_interval_s=0.1)


def _heading(app: DashboardApp) -> str:
    return str(app.screen.query_one("#cluster-heading", Static).render())


def test_n_opens_the_cluster_with_nodes_ownership_and_moves() -> None:
    """``n`` on the overview opens the cluster screen: each node with alive, leader,
    draining and the shards it holds; each shard's state, owner, epoch and placement; the
    MOVING and RECOVERING shards again in the moves table, from owner to placement."""
    async def scenario() -> None:
        source = FakeClusterSource([moving_view()])
        app = _app(source)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, ClusterScreen)
                        and app.screen.panel.overview is not None, what="the first read")
            nodes = rows(app.screen.query_one(NodeTable))
            assert [row[:5] for row in nodes] == [
                ["n1", "yes", "★ leader", "", "2"],
                ["n2 (this)", "yes", "", "", "1"],
                ["n3", "yes", "", "DRAINING", "0"]]
            assert nodes[0][6] == "default/0 default/1"
            assert rows(app.screen.query_one(OwnershipTable)) == [
                ["default/0", "ACTIVE", "n1", "11", "n1"],
                ["default/1", "MOVING", "n1", "12", "n2 (pinned)"],
                ["default/2", "RECOVERING", "n2", "17", "n2"],
                ["default/3", "UNOWNED", "-", "-", "n3"]]
            assert [row[:4] for row in rows(app.screen.query_one(MoveTable))] == [
                ["default/1", "MOVING", "n1", "n2"], ["default/2", "RECOVERING", "n2", "n2"]]
            heading = _heading(app)
            assert "● live" in heading and "leader n1" in heading and "this node n2" in heading
            assert "ACTIVE 1 MOVING 1 RECOVERING 1 UNOWNED 1" in heading
            assert COORDINATOR in heading
    run(scenario)


def test_the_screen_follows_a_move_to_its_end_without_a_key() -> None:
    """Reads repeat on their own: when the records say the moves are done, the moves
    table empties and the drained node, gone, is listed as not alive."""
    async def scenario() -> None:
        source = FakeClusterSource([moving_view(), moving_view(), settled_view()])
        app = _app(source)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("n")
            moves = app.screen.query_one(MoveTable)
            await until(pilot, lambda: source.reads >= 3 and moves.row_count == 0,
                        what="the moves to end")
            assert str(moves.border_title) == "Moves in progress: none"
            states = [row[1] for row in rows(app.screen.query_one(OwnershipTable))]
            assert states == ["ACTIVE"] * 4
            assert rows(app.screen.query_one(NodeTable))[2][:4] == ["n3", "NO", "", "DRAINING"]
    run(scenario)


def test_a_coordinator_that_stops_answering_leaves_the_last_view_marked_stale() -> None:
    """A failed read keeps the tables, marks them stale and says why; the next good read
    makes the screen live again."""
    async def scenario() -> None:
        source = FakeClusterSource([moving_view(), None])  # then fails until told otherwise
        app = _app(source)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("n")
            screen = app.screen
            assert isinstance(screen, ClusterScreen)
            await until(pilot, lambda: screen.panel.failures >= 2, what="two failed reads")
            assert "○ stale" in _heading(app)
            assert "cannot read the coordinator" in _heading(app)
            assert "connection refused" in _heading(app)
            assert app.screen.query_one(OwnershipTable).row_count == 4
            source.views.append(settled_view())
            await until(pilot, lambda: screen.panel.connected, what="a good read again")
            assert "● live" in _heading(app)
    run(scenario)


def test_escape_goes_back_and_the_reads_stop() -> None:
    """Leaving the screen ends its refresh worker, which lets the coordinator go."""
    async def scenario() -> None:
        source = FakeClusterSource([moving_view()])
        app = _app(source)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("n")
            await until(pilot, lambda: source.reads >= 1, what="a read")
            await pilot.press("escape")
            await until(pilot, lambda: source.closes == 1, what="the source closed")
            assert isinstance(app.screen, OverviewScreen)
            reads = source.reads
            await pilot.pause(0.3)  # three read intervals: none may happen (no condition to await)
            assert source.reads == reads
    run(scenario)


def test_a_home_that_is_not_a_cluster_node_says_so() -> None:
    """Without a ``[cluster]`` table there is nothing to read: the screen says so plainly
    and shows no empty tables."""
    async def scenario() -> None:
        app = _app(None)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, ClusterScreen), what="the screen")
            assert "not a cluster node" in _heading(app)
            assert "[cluster]" in _heading(app)
            assert not app.screen.query_one(NodeTable).display
    run(scenario)




def test_the_cluster_screen_fits_80x24() -> None:
    """At 80x24 the heading, the three tables (each with rows on screen) and the footer
    all fit."""
    async def scenario() -> None:
        source = FakeClusterSource([moving_view()])
        app = _app(source)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, ClusterScreen)
                        and app.screen.panel.overview is not None, what="the first read")
            assert app.export_screenshot()
            for table in app.screen.query("DataTable"):
                assert table.region.height >= 4, table
                assert table.region.right <= 80 and table.region.bottom <= 23, table
            assert app.screen.query_one("Footer").region.y == 23
    run(scenario)
