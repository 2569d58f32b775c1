"""Nemeses of a chaos cluster (``cluster_nodes.py``), each with its own recovery.

On the cluster backend the engine nemeses act on one node, drawn by the run's seeded
random source among the running ones:

* ``sigkill``: SIGKILL one node; heal: start it again (it joins with a new session; its
  shards come back once the old session's lease ended and the leader placed them);
* ``sigstop``: SIGSTOP one node, half the time for longer than its session TTL (a node
  that wakes after its lease ended must not publish what it claimed before: its shards
  are owned elsewhere by then); heal: SIGCONT;
* ``restart``: ``nereus engine stop`` of one node (it hands its shards over), then start;
* ``shard-move``: ``nereus shard move SHARD --to NODE`` (a planned move to another
  running node, as an operator does it); heal: wait until the target owns it ACTIVE;
* ``coordinator-outage``: ``scripts/services down|up`` of the cluster's coordinator (etcd
  or Oxia: a server other tests share, so such a test is ``serial``).

The destination nemeses, the clock step, ``kafka-outage`` and ``s3-outage`` are those of
``nemesis.py``: the control file they write is every node's.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass

from tests.chaos.client import run_cli
from tests.chaos.cluster_nodes import ClusterNodes
from tests.chaos.engine_process import EngineFailed, process_state, waited
from tests.chaos.nemesis import NemesisContext, ServiceOutage

MOVE_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 60.0


@dataclass
class ClusterContext(NemesisContext):
    """``NemesisContext`` with the cluster's nodes (``engine`` is the first node)."""

    nodes: ClusterNodes | None = None

    def cluster_nodes(self) -> ClusterNodes:
        assert self.nodes is not None
        return self.nodes

    def victim(self) -> str:
        """A running node, drawn by the run's random source."""
        running = self.cluster_nodes().running()
        if not running:
            raise EngineFailed("no node runs")
        return self.rng.choice(running)


def _nodes(ctx: NemesisContext) -> tuple[ClusterContext, ClusterNodes]:
    assert isinstance(ctx, ClusterContext), "a cluster nemesis needs a ClusterContext"
    return ctx, ctx.cluster_nodes()


@dataclass
class NodeKill:
    name: str = "sigkill"
    engine_wide: bool = True
    _node: str | None = None

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        cluster, nodes = _nodes(ctx)
        self._node = cluster.victim()
        node = nodes[self._node]
        pid = node.signal(signal.SIGKILL)
        node.wait_gone(pid)
        return f"SIGKILL node {self._node} pid {pid}"

    def heal(self, ctx: NemesisContext) -> str:
        _, nodes = _nodes(ctx)
        assert self._node is not None
        nodes[self._node].start(timeout_s=READY_TIMEOUT_S)
        return f"node {self._node} started again, pid {nodes[self._node].pid()}"


@dataclass
class NodeStop:
    """SIGSTOP one node; half the time held past ``beyond_s`` (its session's TTL and
    margin) whatever the schedule's hold, so its lease ends while it sleeps."""

    beyond_s: float
    name: str = "sigstop"
    engine_wide: bool = True
    _node: str | None = None
    _pid: int | None = None
    _until: float = 0.0

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        cluster, nodes = _nodes(ctx)
        self._node = cluster.victim()
        long = cluster.rng.random() < 0.5
        self._until = time.monotonic() + (self.beyond_s if long else 0.0)
        self._pid = nodes[self._node].signal(signal.SIGSTOP)
        return (f"SIGSTOP node {self._node} pid {self._pid}"
                + (f" for at least {self.beyond_s:.1f} s (past its session TTL)" if long
                   else ""))

    def heal(self, ctx: NemesisContext) -> str:
        _, nodes = _nodes(ctx)
        assert self._node is not None and self._pid is not None
        time.sleep(max(0.0, self._until - time.monotonic()))
        if process_state(self._pid) is not None:
            nodes[self._node].signal(signal.SIGCONT, self._pid)
        return f"SIGCONT node {self._node} pid {self._pid}"


@dataclass
class NodeRestart:
    """``nereus engine stop`` of one node (graceful: it hands its shards over); heal:
    start it again."""

    name: str = "restart"
    engine_wide: bool = True
    _node: str | None = None

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        cluster, nodes = _nodes(ctx)
        self._node = cluster.victim()
        pid = nodes[self._node].pid()
        nodes[self._node].stop()
        return f"engine stop of node {self._node} (pid {pid})"

    def heal(self, ctx: NemesisContext) -> str:
        _, nodes = _nodes(ctx)
        assert self._node is not None
        nodes[self._node].start(timeout_s=READY_TIMEOUT_S)
        return f"node {self._node} started again, pid {nodes[self._node].pid()}"


@dataclass
class ShardMove:
    """A planned move of one ACTIVE shard to another running node (``nereus shard move``,
    run in a running node's home); heal: until the target owns it ACTIVE."""

    name: str = "shard-move"
    engine_wide: bool = True  # the shard's lanes stall while it moves
    _shard: str | None = None
    _target: str | None = None

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        cluster, nodes = _nodes(ctx)
        active = {str(s): n for s, n in nodes.chaos.cluster.active_owners().items()}
        running = nodes.running()
        movable = sorted(s for s, n in active.items() if set(running) - {n})
        if not movable:
            raise EngineFailed(f"no shard to move (ACTIVE: {active}, running: {running})")
        self._shard = cluster.rng.choice(movable)
        self._target = cluster.rng.choice(sorted(set(running) - {active[self._shard]}))
        run_cli(nodes[cluster.rng.choice(running)].home, "shard", "move", self._shard,
                "--to", self._target, "--reason", "chaos", "--yes", timeout=60)
        return f"shard move {self._shard} from {active[self._shard]} to {self._target}"

    def heal(self, ctx: NemesisContext) -> str:
        _, nodes = _nodes(ctx)
        assert self._shard is not None and self._target is not None
        shard, target = self._shard, self._target

        def owners() -> dict[str, str]:
            return {str(s): n for s, n in nodes.chaos.cluster.active_owners().items()}

        waited(f"{shard} ACTIVE on {target}", lambda: owners().get(shard) == target,
               MOVE_TIMEOUT_S, seen=owners)
        return f"{shard} ACTIVE on {target}"


def coordinator_outage(coordinator: str) -> ServiceOutage:
    """``scripts/services down|up`` of the coordinator (``etcd`` or ``oxia``)."""
    return ServiceOutage(coordinator, name="coordinator-outage")
