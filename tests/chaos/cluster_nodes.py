"""The node processes of a chaos cluster: started, signalled, stopped, and asked whether
the cluster is ready and quiet.

Each node is an ``EngineProcess`` (the chaos engine child: the real daemon obeying the
run's control file, so the destination and clock nemeses reach every node) on its own
home. A node is ready when its admin socket answers, the coordinator's member record of
its id names its process, and every shard of the cluster has an ACTIVE owner under a live
session (a shard still held by a dead node's session is not ready: its lease has not
ended). ``ClusterNodes`` owns them all: ``close`` leaves nothing running.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.cluster_homes import ChaosCluster
from tests.chaos.engine_process import (
    EngineFailed,
    EngineProcess,
    alive,
    process_state,
    waited,
)
from tests.chaos.runner import _busy

STOP_TIMEOUT_S = 60.0


@dataclass
class NodeProcess(EngineProcess):
    """One node's daemon (``EngineProcess`` with the cluster's notion of ready)."""

    node_id: str = ""
    chaos: ChaosCluster | None = None

    def wait_ready(self, timeout_s: float) -> None:
        """Until this node answers, its member record names its process, and every shard
        of the cluster is ACTIVE on some live node."""
        assert self.chaos is not None
        why: list[str | None] = ["not asked yet"]

        def ready() -> bool:
            if self._proc is not None and self._proc.poll() is not None:
                raise EngineFailed(f"node {self.node_id} exited with {self._proc.returncode}: "
                                   f"{self.output()}")
            why[0] = self._not_ready()
            return not why[0]

        waited(f"node {self.node_id} ready", ready, timeout_s,
               seen=lambda: f"{why[0]}: {self.output()}")

    def _not_ready(self) -> str | None:
        assert self.chaos is not None
        if self.status() is None:
            return "its admin socket does not answer"
        try:
            member = self.chaos.cluster.store.members().get(self.node_id)
            active = self.chaos.cluster.active_owners()
        except Exception as exc:  # the coordinator away: ask again
            return f"the coordinator: {type(exc).__name__}: {exc}"
        if member is None or member.pid != self.pid():
            return f"its member record names {None if member is None else member.pid}"
        missing = sorted(set(self.chaos.shards) - {str(s) for s in active})
        return f"no ACTIVE owner of {', '.join(missing)}" if missing else None

    def close(self) -> None:
        """As ``EngineProcess.close``, without asking a node that is gone to stop."""
        pid = self.pid()
        if pid is not None and alive(pid):
            super().close()
            return
        for proc in self._procs:
            with contextlib.suppress(Exception):
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=10)

    def running(self) -> bool:
        """Its process lives and is not stopped."""
        pid = self.pid()
        return pid is not None and alive(pid) and process_state(pid) != "T"


@dataclass
class ClusterNodes:
    """Every node of a chaos cluster, by id."""

    chaos: ChaosCluster
    nodes: dict[str, NodeProcess] = field(default_factory=dict)

    def __getitem__(self, node_id: str) -> NodeProcess:
        return self.nodes[node_id]

    def ids(self) -> list[str]:
        return sorted(self.nodes)

    def running(self) -> list[str]:
        """The nodes whose process runs (not dead, not stopped)."""
        return [n for n in self.ids() if self.nodes[n].running()]

    def start_all(self, timeout_s: float = 90.0) -> None:
        """Every node started at once, until each is ready and every node owns a shard (the
        leader's placement spread them)."""
        errors: list[BaseException] = []

        def start(node: NodeProcess) -> None:
            try:
                node.start(timeout_s=timeout_s)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(node,), daemon=True)
                   for node in self.nodes.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout_s + 30)
        if errors:
            raise errors[0]
        self.wait_spread(timeout_s)

    def wait_spread(self, timeout_s: float) -> None:
        """Until every node owns an ACTIVE shard."""
        owners: set[str] = set()

        def spread() -> bool:
            nonlocal owners
            with contextlib.suppress(Exception):  # the coordinator away: ask again
                owners = set(self.chaos.cluster.active_owners().values())
            return owners >= set(self.nodes)

        waited("every node owning a shard", spread, timeout_s, seen=lambda: owners)

    def busy(self) -> str | None:
        """Why the cluster is not quiet yet (None: it is): every shard ACTIVE on the node
        its placement names (no move under way) and, on every node, nothing lagging,
        claimed, in flight, PUBLISHING or due (``runner._busy``)."""
        try:
            placed = {str(s): p.node_id for s, (p, _) in
                      self.chaos.cluster.store.placements().items()}
            active = {str(s): n for s, n in self.chaos.cluster.active_owners().items()}
        except Exception as exc:
            return f"the coordinator: {type(exc).__name__}: {exc}"
        for shard in self.chaos.shards:
            if active.get(shard) is None or active.get(shard) != placed.get(shard):
                return (f"{shard} ACTIVE on {active.get(shard)}, placed on "
                        f"{placed.get(shard)}")
        for node_id in self.ids():
            why = _busy(self.nodes[node_id])
            if why is not None:
                return f"{node_id}: {why}"
        return None

    def statuses(self) -> dict[str, dict[str, Any] | None]:
        return {n: self.nodes[n].status() for n in self.ids()}

    def stop_all(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM every node at once (one by one, each would hand its shards to the others
        first), and wait until each is gone."""
        pids = {n: self.nodes[n].pid() for n in self.ids()}
        for pid in pids.values():
            if pid is not None and alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    self.nodes[self.ids()[0]].signal(signal.SIGCONT, pid)
                    self.nodes[self.ids()[0]].signal(signal.SIGTERM, pid)
        for node_id, pid in pids.items():
            if pid is not None:
                self.nodes[node_id].wait_gone(pid, timeout_s)

    def close(self) -> None:
        """Whatever still runs of every node is stopped or killed."""
        for node in self.nodes.values():
            node.close()
