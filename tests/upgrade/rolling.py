"""A rolling upgrade under traffic, judged by the chaos history checker.

Three nodes of release 0.1.0 (built from its commit: ``release_build.py``) share the four
shards of the chaos cluster (``tests/chaos/cluster_homes.py``: etcd, the Command Topic and
every lane on Kafka) while the chaos workload runs (``tests/chaos/cluster_runner.py``).
The one nemesis, ``RollingUpgrade``, replaces the nodes one at a time: SIGTERM (the node
hands its shards over), started again in its home with the current build, then
``mixed_s`` with both builds live before the next. The new nodes claim the test-only
feature level (``NEREUS_FEATURE_LEVEL_TESTING=1``). Once all three run it, ``nereus upgrade
finalize`` raises the cluster's level; then a node of 0.1.0 and a node of the current build
claiming only its supported level are started in homes of their own, and each must be refused.
The run's history goes through ``tests/chaos/checker.py`` like any chaos run: no
acknowledged command lost, nothing early, no attempt published twice, ORDERED keys in
order, every shard ACTIVE at the end, replay digests equal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tests.chaos.cluster_nemesis import ClusterContext
from tests.chaos.cluster_nodes import NodeProcess
from tests.chaos.cluster_runner import run_cluster_chaos
from tests.chaos.engine_process import EngineFailed
from tests.chaos.homes import Brokers
from tests.chaos.nemesis import NemesisContext
from tests.chaos.runner import RunReport, RunSpec
from tests.conftest import run_nereus
from tests.upgrade.release_build import REPO, ReleaseBuild

TESTING = {"NEREUS_FEATURE_LEVEL_TESTING": "1"}
READY_S = 120.0
REFUSED_S = 45.0


@dataclass
class UpgradableNode(NodeProcess):
    """A chaos node whose daemon is ``build``'s (None: this checkout's), run as the chaos
    engine child of that build's own tree."""

    build: ReleaseBuild | None = None
    testing_level: bool = False  # claim the test-only feature level

    def launch_child(self, out: Path) -> subprocess.Popen[bytes]:
        return launch_child(self.home, self.control, out, self.build,
                            testing_level=self.testing_level)


def launch_child(home: Path, control: Path, out: Path, build: ReleaseBuild | None, *,
                 testing_level: bool) -> subprocess.Popen[bytes]:
    """``python -m tests.chaos.engine_child`` of ``build`` (its interpreter, its tree)."""
    python, tree = (Path(sys.executable), REPO) if build is None else (build.python, build.tree)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    environ["PYTHONPATH"] = str(tree)
    if testing_level:
        environ.update(TESTING)
    with open(out, "wb") as handle:
        return subprocess.Popen(
            [str(python), "-m", "tests.chaos.engine_child", "--home", str(home),
             "--workers", "1", "--control", str(control)],
            stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=tree, env=environ)


@dataclass
class RollingUpgrade:
    """The nemesis (module docstring). ``start`` replaces every node in turn; ``heal``
    finalizes and checks the refusals. Injected again, it has nothing left to do."""

    release: ReleaseBuild
    mixed_s: float
    name: str = "rolling-upgrade"
    engine_wide: bool = False
    done: bool = False
    mixed_started_ms: int | None = None
    mixed_ended_ms: int | None = None
    refusals: dict[str, str] = field(default_factory=dict)

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        assert isinstance(ctx, ClusterContext)
        if self.done:
            return "every node runs the current build already"
        nodes = ctx.cluster_nodes()
        said = []
        for index, node_id in enumerate(nodes.ids()):
            node = nodes[node_id]
            assert isinstance(node, UpgradableNode)
            pid = node.signal(signal.SIGTERM)
            node.wait_gone(pid, READY_S)
            node.build, node.testing_level = None, True
            node.start(timeout_s=READY_S)
            if self.mixed_started_ms is None:
                self.mixed_started_ms = _now_ms()
            said.append(f"{node_id} pid {pid} -> {node.pid()}")
            if index < len(nodes.ids()) - 1:
                time.sleep(self.mixed_s)
        self.mixed_ended_ms = _now_ms()
        self.done = True
        return "upgraded " + ", ".join(said)

    def heal(self, ctx: NemesisContext) -> str:
        assert isinstance(ctx, ClusterContext)
        if "finalize" in self.refusals:
            return "finalized already"
        nodes = ctx.cluster_nodes()
        home = nodes[nodes.ids()[0]].home
        done = run_nereus("--json", "upgrade", "finalize", "--reason", "rolling upgrade done",
                          "--yes", home=home, env=TESTING)
        if done.code != 0:
            raise EngineFailed(f"upgrade finalize: {done.stdout}{done.stderr}")
        self.refusals["finalize"] = done.json()["result"]
        self.refusals["0.1.0"] = refused(home, "n9", self.release, ctx.control)
        self.refusals["level 1"] = refused(home, "n8", None, ctx.control)
        return f"finalized: {self.refusals}"


def refused(like: Path, node_id: str, build: ReleaseBuild | None, control: Path) -> str:
    """Start node ``node_id`` of ``build`` in a home of its own (copied from ``like``'s
    configuration) claiming level 1; it must exit non-zero: what it said."""
    home = like.parent / node_id
    home.mkdir(mode=0o700)
    text = (like / "nereus.toml").read_text()
    (home / "nereus.toml").write_text(text.replace(f'node_id = "{like.name}"',
                                                   f'node_id = "{node_id}"'))
    out = home / "refused.out"
    proc = launch_child(home, control, out, build, testing_level=False)
    try:
        code = proc.wait(timeout=REFUSED_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        raise EngineFailed(f"node {node_id} was not refused: {out.read_text()[-800:]}") from None
    said = out.read_text(errors="replace")
    if code == 0:
        raise EngineFailed(f"node {node_id} exited 0: {said[-800:]}")
    return said.strip().splitlines()[-1] if said.strip() else f"exit {code}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def rolling_upgrade(root: Path, brokers: Brokers, release: ReleaseBuild, *, seed: int,
                    ops: int, duration_s: float, mixed_s: float,
                    coordinator: str = "etcd") -> tuple[RunReport, RollingUpgrade]:
    """One rolling upgrade under the chaos workload (module docstring)."""
    upgrade = RollingUpgrade(release, mixed_s)
    spec = RunSpec(seed=seed, ops=ops, duration_s=duration_s, backend="cluster",
                   nemeses=("rolling-upgrade",), quiesce_s=90.0, pause_s=(1.0, 2.0),
                   hold_s=(1.0, 2.0), operator=False, replay=True, coordinator=coordinator)
    report = run_cluster_chaos(spec, root, brokers,
                               make_node=partial(UpgradableNode, build=release),
                               nemeses_given=[upgrade])
    return report, upgrade
