"""What the cluster refuses."""

from __future__ import annotations

from nereus.coordination.errors import CoordinationError
from nereus.errors import NotFound


class NodeIdInUse(CoordinationError):
    """Another live node already registered this node id."""

    def __init__(self, node_id: str, holder: str) -> None:
        super().__init__(
            f"node id {node_id!r} is already in use by a live node ({holder})",
            hint="give each node its own id (`nereus init --join URL --node-id ID`), or stop "
                 "the other node first; its record goes when its session ends")
        self.node_id = node_id


class NodeIdInUseElsewhere(NodeIdInUse):
    """A live node of another home runs under this node id (as one process or as its
    workers ``<id>-w<K>``): not this home's previous run, whose session ends on its own."""


class ClusterNotInitialised(CoordinationError, NotFound):
    """The coordinator holds no configuration for this cluster."""

    def __init__(self, url: str) -> None:
        super().__init__(
            f"no cluster configuration at {url}",
            hint=f"write one with `nereus cluster init --coordinator {url} --from FILE.toml`")


class ClusterMoved(CoordinationError):
    """The cluster moved to another coordinator (``nereus cluster migrate``): nothing
    starts or joins here any more."""

    def __init__(self, url: str, target: str, moved_ms: int) -> None:
        from datetime import UTC, datetime

        when = datetime.fromtimestamp(moved_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        super().__init__(
            f"the cluster at {url} moved to {target} ({when}): its nodes run there now",
            hint=f"make this home a node there with `nereus cluster rejoin --to {target}`")
        self.url = url
        self.target = target


class MigrationRefused(CoordinationError):
    """``nereus cluster migrate`` or ``rejoin`` will not go on: a node is live, the target
    holds another cluster, or the home is not this cluster's."""
