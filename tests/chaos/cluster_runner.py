"""One chaos run on a cluster (``RunSpec.backend == "cluster"``): three nodes on one host
sharing four shards through the coordinator (``cluster_homes.py``), the same seeded
workload and history as ``runner.py``, the node nemeses (``cluster_nemesis.py``).

1. makes the cluster's configuration record and three node homes, and starts every node
   (the chaos engine child, so the control file's faults reach each);
2. starts a consumer on every lane, then runs the workload and the nemesis schedule side
   by side; each client operation goes to a running node drawn at random (its admin
   socket passes a request for another node's shard on to that shard's owner), or
   straight to the Command Topic when none runs;
3. heals everything (every node continued or started, the coordinator up), reopens what
   operators closed, and waits until the cluster is quiet: every shard ACTIVE on the node
   its placement names and, on every node, nothing lagging, claimed, in flight,
   PUBLISHING or due;
4. stops every node at once, reads every Command Topic partition, each shard's final
   state from the home whose copy applied the most of its log (its last owner's), and the
   digests there (live, replay from empty and from every checkpoint, whichever node made
   it, and a replay from empty in a home with other ``[shard]`` limits);
5. checks the history as any other (``checker.check``): ordered lanes across moves, one
   publish per attempt across owners, every replay digest.
"""

from __future__ import annotations

import contextlib
import random
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from nereus.adapters.admin.admin_client import AdminClient, EngineSink
from nereus.cli.context import Env
from nereus.cli.output import Output
from nereus.client import CommandSink, LogSink
from nereus.errors import NotFound
from nereus.layout import HomeLayout
from nereus.shard import ShardId
from nereus.state.store import ShardStore
from tests.chaos.checker import Facts, check
from tests.chaos.client import (
    ADMIN_TIMEOUT_S,
    WAIT_MS,
    BoundedAdmin,
    CliFailed,
    Executor,
    Recorder,
    run_cli,
)
from tests.chaos.cluster_homes import NODES, SESSION_TTL_MS, ChaosCluster, make_chaos_cluster
from tests.chaos.cluster_nemesis import (
    ClusterContext,
    NodeKill,
    NodeRestart,
    NodeStop,
    ShardMove,
    coordinator_outage,
)
from tests.chaos.cluster_nodes import ClusterNodes, NodeProcess
from tests.chaos.collect import digests, final_state, log_entries
from tests.chaos.consumers import Consumers
from tests.chaos.control import Control, write_control
from tests.chaos.engine_process import EngineFailed, alive, process_state
from tests.chaos.history import (
    HistoryWriter,
    QueryAnswer,
    Receipt,
    RunEnded,
    RunStarted,
    Seen,
    read_history,
)
from tests.chaos.homes import FAULTED, HEALTHY, ORDERED, Brokers
from tests.chaos.nemesis import Composed, Nemesis, Schedule
from tests.chaos.runner import (
    RunReport,
    RunSpec,
    _clock_bound,
    _now_ms,
    _quiesce,
    _reopen,
    _settle,
    _side_by_side,
    build_nemeses,
    lateness_p99,
    recorder_write_all,
)
from tests.chaos.workload import Planned, WorkloadSpec, plan
from tests.integration.services import run_services

# the nemeses of runner.py that reach a cluster as they reach one engine
SHARED_NEMESES = frozenset({"refuse", "slow", "hang", "fail-after-write", "clock-step",
                            "kafka-outage", "s3-outage", "none"})
CLUSTER_NEMESES = ("sigkill", "sigstop", "restart", "shard-move", "coordinator-outage",
                   *sorted(SHARED_NEMESES))


def build_cluster_nemeses(names: tuple[str, ...], coordinator: str) -> list[Nemesis]:
    """The nemeses ``names`` say on a cluster (``a+b``: both at once); a nemesis that
    does not apply to a cluster (a file lane's path, a worker process, a checkpoint
    restore, a full disk, Pulsar) is refused naming those that do."""
    out: list[Nemesis] = []
    for name in names:
        if "+" in name:
            out.append(Composed(build_cluster_nemeses(tuple(name.split("+")), coordinator)))
        elif name == "sigkill":
            out.append(NodeKill())
        elif name == "sigstop":
            out.append(NodeStop(beyond_s=(SESSION_TTL_MS * 1.5) / 1000))
        elif name == "restart":
            out.append(NodeRestart())
        elif name == "shard-move":
            out.append(ShardMove())
        elif name == "coordinator-outage":
            out.append(coordinator_outage(coordinator))
        elif name in SHARED_NEMESES:
            out += build_nemeses((name,))
        else:
            raise ValueError(f"nemesis {name!r} does not apply to a cluster (known there: "
                             f"{', '.join(CLUSTER_NEMESES)})")
    return out


def run_cluster_chaos(spec: RunSpec, root: Path, brokers: Brokers, *,
                      make_node: Callable[..., NodeProcess] = NodeProcess,
                      nemeses_given: Sequence[Nemesis] | None = None) -> RunReport:
    """One cluster run under ``root`` (kept: its history is ``root/history.jsonl``).
    ``make_node`` makes each node's process (another build's: ``tests/upgrade/rolling.py``);
    ``nemeses_given`` replaces the nemeses ``spec.nemeses`` names."""
    root.mkdir(parents=True, exist_ok=True)
    history = root / "history.jsonl"
    history.unlink(missing_ok=True)
    notes: list[str] = []
    nemeses = list(nemeses_given) if nemeses_given is not None else \
        build_cluster_nemeses(spec.nemeses, spec.coordinator)
    faulted = {lane for n in nemeses for lane in n.lanes()}
    quiesced = False
    with make_chaos_cluster(root, brokers, spec.coordinator) as chaos:
        control = root / "control.json"
        write_control(control, Control())
        lanes = [msgspec.structs.replace(lane, healthy=lane.name in HEALTHY
                                         and lane.name not in faulted)
                 for lane in chaos.lanes]
        writer = HistoryWriter(history)
        recorder = Recorder(writer)
        nodes = ClusterNodes(chaos, {n: make_node(chaos.home(n), control, node_id=n,
                                                  chaos=chaos, on_start=recorder.write)
                                     for n in NODES})
        rng = random.Random(spec.seed)
        ctx = ClusterContext(engine=nodes[NODES[0]], control=control, home=chaos.home(NODES[0]),
                             lanes={lane.name: lane.destination for lane in lanes}, rng=rng,
                             shards=chaos.shards, nodes=nodes)
        try:
            recorder.write(RunStarted(
                seed=spec.seed, backend="cluster", nemeses=list(spec.nemeses), ops=spec.ops,
                duration_s=spec.duration_s, lanes=lanes, shards=chaos.shards,
                clock_bound_ms=_clock_bound(spec), lateness_bound_ms=spec.lateness_bound_ms,
                started_ms=_now_ms(), inline_limit=1_024, home=str(root / "homes")))
            nodes.start_all()
            with Consumers(recorder, chaos.consumers) as consumers:
                workload = WorkloadSpec(
                    seed=spec.seed, ops=spec.ops, duration_s=spec.duration_s,
                    lanes=FAULTED + HEALTHY, ordered_lanes=ORDERED,
                    shards=tuple(chaos.shards), operator=spec.operator,
                    expiring=spec.expiring,
                    gated_lanes=tuple(lane for lane in FAULTED if lane not in faulted))
                executor = ClusterExecutor(
                    chaos.home(NODES[0]), plan(workload), recorder, _now_ms() + 300,
                    root / "scratch", evidence_of=consumers.evidence,
                    operator_keys=spec.operator_keys,
                    homes=[chaos.home(n) for n in NODES], pick=random.Random(spec.seed + 1))
                schedule = Schedule(nemeses, ctx, recorder, duration_s=spec.duration_s,
                                    pause_s=spec.pause_s, hold_s=spec.hold_s)
                _side_by_side(executor, schedule, spec)
                notes += [f"nemesis error: {e}" for e in schedule.errors]
                _recover(nodes, spec, notes)
                _reopen(executor)
                quiesced = _quiesce(nodes.busy, consumers, spec.quiesce_s, notes)
                nodes.stop_all()
                _settle(consumers)
                notes += [f"consumer: {e}" for e in consumers.errors[:3]]
            collect_cluster(chaos, recorder, replay=spec.replay)
            recorder.write(RunEnded(ended_ms=_now_ms(), quiesced=quiesced,
                                    faults=recorder.faults, notes=notes))
        finally:
            nodes.close()
            writer.close()
    lines = read_history(history)
    return RunReport(seed=spec.seed, backend="cluster", nemeses=list(spec.nemeses),
                     history=str(history), operations=recorder.ops, faults=recorder.faults,
                     seen=sum(1 for line in lines if isinstance(line.entry, Seen)),
                     quiesced=quiesced, lateness_p99_ms=lateness_p99(Facts.of(lines)),
                     violations=check(lines), notes=notes)


def _recover(nodes: ClusterNodes, spec: RunSpec, notes: list[str]) -> None:
    """A run ends with its coordinator up, no fault injected (the control file reset) and
    every node running: continued if stopped, started if dead, killed and started again if
    it does not answer (each noted)."""
    write_control(nodes[nodes.ids()[0]].control, Control())
    if any("coordinator-outage" in name for name in spec.nemeses) and run_services(
            "status", spec.coordinator, timeout=30).returncode != 0:
        notes.append(f"{spec.coordinator} was down after the nemeses: started again")
        run_services("up", spec.coordinator, timeout=600)
    for node_id in nodes.ids():
        node = nodes[node_id]
        pid = node.pid()
        if pid is not None and process_state(pid) == "T":
            node.signal(signal.SIGCONT, pid)
        if pid is not None and alive(pid):
            if node.status(timeout=20) is not None:
                continue
            notes.append(f"node {node_id} (pid {pid}) did not answer after the nemeses: "
                         "killed")
            node.signal(signal.SIGKILL, pid)
            node.wait_gone(pid)
        else:
            notes.append(f"node {node_id} was not running after the nemeses: started again")
        node.start()
    with contextlib.suppress(EngineFailed):
        nodes[nodes.ids()[0]].wait_ready(60)


def collect_cluster(chaos: ChaosCluster, recorder: Recorder, *, replay: bool) -> None:
    """After every node stopped: each Command Topic partition's records, each shard's final
    state and (``replay``) digests from its newest copy."""
    for shard in chaos.shards:
        recorder_write_all(recorder, log_entries(chaos.home(NODES[0]), shard))
        home = newest_home(chaos, shard)
        if home is None:
            continue
        recorder_write_all(recorder, final_state(home, shard))
        if replay:
            recorder_write_all(recorder, digests(home, shard, chaos.replay_home))


def newest_home(chaos: ChaosCluster, shard: str) -> Path | None:
    """The node home whose copy of ``shard`` applied the most of its log (None: no home
    holds one)."""
    best: tuple[int, Path] | None = None
    for node_id in NODES:
        home = chaos.home(node_id)
        path = HomeLayout(home).shard_state(ShardId.parse(shard))
        if not (path / "CURRENT").exists():
            continue
        with ShardStore.open(path, read_only=True) as store:
            applied = store.applied_position()
        if applied is not None and (best is None or applied > best[0]):
            best = (applied, home)
    return None if best is None else best[1]


@dataclass
class ClusterExecutor(Executor):
    """``Executor`` whose every operation goes through a running node drawn by ``pick``
    (a frozen node counts: its call times out, indeterminate), or to the Command Topic
    when none runs; ``attempt_resolve`` asks every node (each lists its own shards')."""

    homes: list[Path] = field(default_factory=list)
    pick: random.Random = field(default_factory=random.Random)
    _envs: dict[Path, Env] = field(default_factory=dict)
    _pick_lock: threading.Lock = field(default_factory=threading.Lock)

    def _env_of(self, home: Path) -> Env:
        with self._pick_lock:
            if home not in self._envs:
                self._envs[home] = Env(home=home, output=Output(json_mode=True))
            return self._envs[home]

    def _running(self) -> list[Path]:
        """The nodes whose admin socket accepts a connection (a node still joining holds
        its home with its previous run's socket file, which refuses: a client goes to
        another node; a frozen node's socket accepts, and the call times out)."""
        return [home for home in self.homes if self._env_of(home).engine_running()
                and _accepts(self._socket(home))]

    def _node(self) -> Path | None:
        running = self._running()
        with self._pick_lock:
            return self.pick.choice(running) if running else None

    def _socket(self, home: Path) -> Path:
        return HomeLayout(home).run / "admin.sock"

    def _sink(self, wait: bool) -> tuple[CommandSink, bool]:
        home = self._node()
        if home is None:
            return LogSink(self.env.command_log), False
        admin = BoundedAdmin(self._socket(home), timeout=ADMIN_TIMEOUT_S
                             + (WAIT_MS / 1000 if wait else 0))
        return EngineSink(admin, wait_ms=WAIT_MS), wait

    def _query(self, item: Planned, *, barrier: bool = False) -> tuple[
            list[Receipt], QueryAnswer, dict[str, Any]]:
        message_id = item.message_id
        assert message_id
        home = self._node()
        if home is None:
            raise ValueError("no node runs: a query needs one")
        admin = AdminClient(self._socket(home), timeout=ADMIN_TIMEOUT_S + 30
                            if barrier else ADMIN_TIMEOUT_S)
        try:
            data = admin.message(message_id, route=self.route, barrier=barrier)
        except NotFound:
            return [], QueryAnswer(state=None), {}
        return [], QueryAnswer(state=data["state"], generation=data["generation"],
                               applied_position=data["applied_position"],
                               barrier_position=data["barrier_position"],
                               conclusive=bool(data["conclusive"])), {}

    def _mutation(self, *args: str, key: str | None = None) -> list[Receipt]:
        home = self._node()
        return self._mutation_in(home or self.home, home is not None, *args, key=key)

    def _attempt_resolve(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        """Resolve one UNKNOWN attempt whose record a consumer read, through the node that
        lists it (each node lists its own shards' attempts)."""
        for home in self._running():
            try:
                unknown = run_cli(home, "attempt", "list", "--state", "unknown")
            except CliFailed:
                continue
            listed = unknown if isinstance(unknown, list) else unknown.get("attempts", [])
            for attempt in listed:
                evidence = self.evidence_of(str(attempt["attempt_id"]))
                if evidence is None:
                    continue
                receipts = self._mutation_in(home, True, "attempt", "resolve",
                                             str(attempt["attempt_id"]), "--published",
                                             "--evidence", evidence)
                return receipts, None, {"target": str(attempt["attempt_id"])}
        return [], None, {}


def _accepts(path: Path) -> bool:
    """Whether the Unix socket at ``path`` accepts a connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
