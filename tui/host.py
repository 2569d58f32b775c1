"""What screens may ask of the app that hosts them — and nothing more.

Screens are handed a ``DashboardHost`` when they are built instead of reaching into
``self.app``: they read the current state and the sources (the engine's admin socket, the
cluster's coordinator), and ask for a lane mutation, which the app alone runs (behind a
confirmation).
"""

from __future__ import annotations

from typing import Protocol

from nereus.tui.cluster_source import ClusterSource
from nereus.tui.mutations import LaneAction
from nereus.tui.source import DashboardSource
from nereus.tui.state import DashboardState


class DashboardHost(Protocol):
    @property
    def state(self) -> DashboardState: ...

    @property
    def source(self) -> DashboardSource: ...

    @property
    def retry_s(self) -> float: ...

    @property
    def cluster(self) -> ClusterSource | None:
        """The coordinator of this home's cluster; None when the home is not a node."""
        ...

    @property
    def cluster_interval_s(self) -> float: ...

    def request_lane_mutation(self, action: LaneAction, lane: str) -> None:
        """Ask for a reason, then run the mutation (or do nothing if cancelled)."""
        ...
