"""``nereus cluster migrate --to URL`` and ``nereus cluster rejoin --to URL``, as an operator
runs them, on embedded coordinators (two SQLite files: no service). The same commands on
etcd and Oxia with running nodes are ``tests/integration/test_cluster_migrate.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import open_cluster, sqlite_url
from nereus.cluster import keys
from nereus.cluster.errors import ClusterMoved
from nereus.cluster.records import Drain, Placement
from nereus.coordination.records import prefix_range
from nereus.shard import ShardId
from tests.cli.cluster_homes import initialised_cluster, simulated
from tests.conftest import CliResult, run_nereus

pytestmark = pytest.mark.timeout(120)


def _store(url: str) -> ClusterStore:
    return ClusterStore(open_cluster(url))


def _durable(url: str) -> dict[str, bytes]:
    """Every durable record of the cluster, by key below its root."""
    store = _store(url)
    try:
        root = store.handle.root
        low, high = prefix_range(root)
        return {r.key[len(root):]: r.value
                for r in store.handle.coordinator.range_scan(low, high)
                if not r.version.is_ephemeral}
    finally:
        store.handle.close()


def _populated(directory: Path) -> str:
    """A cluster with one of every durable kind: configuration and audit, a pinned
    placement, a drain, a route key, two catalog entries and four epoch counters."""
    url = initialised_cluster(directory)
    with simulated(url) as cluster:
        store = cluster.store
        node = cluster.node("n1")
        for p in range(4):
            node.own(f"default/{p}")
        store.place(ShardId("default", 1), Placement(shard="default/1", node_id="n1",
                                                     pinned=True, operator="op",
                                                     reason="pin"), expected=None)
        store.drain(Drain(node_id="n2", operator="op", reason="old hardware"))
        for name in ("a", "b"):
            store.handle.coordinator.put(store.key(f"catalog/default/0/{name}.json"),
                                         f'{{"id": "{name}"}}'.encode())
    return url


def _migrate(source: str, target: str, *more: str, home: Path) -> CliResult:
    return run_nereus("--json", "cluster", "migrate", "--coordinator", source, "--to", target,
                      "--reason", "to the seeds' authority", *more, home=home)


def test_migrate_copies_every_durable_record_and_marks_the_source_moved(
        tmp_path: Path) -> None:
    """Configuration, audit, placements, drains, route keys, catalog and epoch counters
    reach the target byte for byte (and nothing ephemeral does); the report counts them by
    kind and lists each shard's epoch; the source is marked moved, so reading it as a
    cluster is refused naming the target, and the target reads as the same cluster."""
    source = _populated(tmp_path)
    target = sqlite_url(tmp_path / "b.db", "test")
    before = _durable(source)
    done = _migrate(source, target, "--yes", home=tmp_path / "op")
    assert done.code == 0, done.stderr
    report: dict[str, Any] = done.json()
    assert report["result"] == "MIGRATED" and report["replaced"] is None
    copied = {k: v for k, v in _durable(target).items() if k != keys.MIGRATED}
    assert copied == before
    kinds = {row["kind"]: row["records"] for row in report["kinds"]}
    assert kinds == {"catalog": 2, "config": 1, "config-audit": 1, "drains": 1,
                     "epochs": 4, "placement": 1, "secrets": 1}
    epochs = _store(source).epochs()
    assert {row["shard"]: row["epoch"] for row in report["epochs"]} == \
        {str(shard): e.epoch for shard, e in epochs.items()}
    status = run_nereus("--json", "cluster", "status", "--coordinator", source,
                        home=tmp_path / "op")
    assert status.code == 1
    assert "moved to" in status.json()["error"] and target in status.json()["error"]
    config = run_nereus("--json", "cluster", "config", "--coordinator", target,
                        home=tmp_path / "op")
    assert config.code == 0 and config.json()["revision"] == 1
    replaced = run_nereus("--json", "cluster", "init", "--coordinator", source, "--from",
                          str(tmp_path / "cluster.toml"), "--replace", "--reason", "late",
                          home=tmp_path / "op")
    assert replaced.code == 1 and "moved to" in replaced.json()["error"], replaced.stdout


def test_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    """--dry-run reports what would be copied; neither coordinator changes."""
    source = _populated(tmp_path)
    target = sqlite_url(tmp_path / "b.db", "test")
    before = _durable(source)
    dry = _migrate(source, target, "--dry-run", home=tmp_path / "op")
    assert dry.code == 0, dry.stderr
    assert dry.json()["result"] == "DRY_RUN" and dry.json()["records"] == len(before)
    assert _durable(source) == before
    assert _durable(target) == {}


def test_migrate_is_refused_while_a_node_is_live_naming_it(tmp_path: Path) -> None:
    """A live node (a member record on its session) refuses the migration with exit 1,
    naming the node, its host and pid; nothing is written to either side."""
    source = initialised_cluster(tmp_path)
    target = sqlite_url(tmp_path / "b.db", "test")
    with simulated(source) as cluster:
        cluster.node("n7")
        refused = _migrate(source, target, "--yes", home=tmp_path / "op")
    assert refused.code == 1, refused.stdout
    error = refused.json()["error"]
    assert "node n7 (test-host" in error and "live" in error, error
    assert _durable(target) == {}
    assert _store(source).moved() is None


def test_migrate_is_refused_when_the_target_holds_another_cluster(tmp_path: Path) -> None:
    """A target with another cluster of the same name (its own configuration) is left as
    it is, exit 1, the error saying whose configuration it holds."""
    source = _populated(tmp_path)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    target = initialised_cluster(other_dir)
    theirs = _durable(target)
    refused = _migrate(source, target, "--yes", home=tmp_path / "op")
    assert refused.code == 1, refused.stdout
    assert "holds another cluster" in refused.json()["error"]
    assert _durable(target) == theirs
    assert _store(source).moved() is None


def test_migrating_back_replaces_the_old_copy_and_the_first_target_is_then_moved(
        tmp_path: Path) -> None:
    """A to B, a change on B (a new drain), then B back to A: A holds B's records (the
    change included) and is a live cluster again, B is marked moved to A; the report says
    A held this cluster as it was when it moved."""
    a = _populated(tmp_path)
    b = sqlite_url(tmp_path / "b.db", "test")
    assert _migrate(a, b, "--yes", home=tmp_path / "op").code == 0
    store = _store(b)
    store.drain(Drain(node_id="n3", operator="op", reason="after the move"))
    store.handle.close()
    back = _migrate(b, a, "--yes", home=tmp_path / "op")
    assert back.code == 0, back.stderr
    assert back.json()["replaced"].startswith("this cluster, as it was when it moved to")
    on_a = _store(a)
    assert on_a.moved() is None and "n3" in on_a.drains()
    assert {k: v for k, v in _durable(a).items() if k != keys.MIGRATED} == \
        {k: v for k, v in _durable(b).items() if k not in (keys.MIGRATED, keys.MOVED)}
    with pytest.raises(ClusterMoved):
        _store(b).require_config()


def test_rejoin_points_a_nodes_home_at_the_new_coordinator(tmp_path: Path) -> None:
    """A node's home made by init --join names the old coordinator; after the migration
    `cluster rejoin --to NEW` rewrites its [cluster] coordinator line (every other line
    kept) and the home reads the cluster there; before it, the home's commands are refused
    with the hint to rejoin. A second rejoin is UNCHANGED."""
    source = initialised_cluster(tmp_path)
    target = sqlite_url(tmp_path / "b.db", "test")
    node = tmp_path / "n1"
    joined = run_nereus("--json", "init", "--join", source, "--node-id", "n1", home=node)
    assert joined.code == 0, joined.stderr
    text = (node / "nereus.toml").read_text()
    assert _migrate(source, target, "--yes", home=tmp_path / "op").code == 0
    stale = run_nereus("--json", "cluster", "status", home=node)
    assert stale.code == 1 and "cluster rejoin --to" in stale.json()["hint"]
    dry = run_nereus("--json", "cluster", "rejoin", "--to", target, "--dry-run", home=node)
    assert dry.code == 0 and dry.json()["result"] == "DRY_RUN"
    assert (node / "nereus.toml").read_text() == text
    rejoined = run_nereus("--json", "cluster", "rejoin", "--to", target, home=node)
    assert rejoined.code == 0, rejoined.stderr
    assert rejoined.json()["result"] == "REJOINED"
    assert rejoined.json()["previous"] == source
    now = (node / "nereus.toml").read_text()
    assert now == text.replace(f'"{source}"', f'"{target}"')
    status = run_nereus("--json", "cluster", "status", home=node)
    assert status.code == 0 and status.json()["coordinator"] == target
    again = run_nereus("--json", "cluster", "rejoin", "--to", target, home=node)
    assert again.code == 0 and again.json()["result"] == "UNCHANGED"


def test_rejoin_is_refused_to_a_cluster_not_copied_from_the_homes(tmp_path: Path) -> None:
    """A coordinator holding a cluster that was not migrated from the home's coordinator
    is another cluster: exit 1, the home's file unchanged."""
    source = initialised_cluster(tmp_path)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = initialised_cluster(other_dir)
    node = tmp_path / "n1"
    assert run_nereus("init", "--join", source, "--node-id", "n1", home=node).code == 0
    text = (node / "nereus.toml").read_text()
    refused = run_nereus("--json", "cluster", "rejoin", "--to", other, home=node)
    assert refused.code == 1, refused.stdout
    assert "another cluster" in refused.json()["error"]
    assert (node / "nereus.toml").read_text() == text


def test_a_node_that_joins_a_moved_cluster_leaves_at_once(tmp_path: Path) -> None:
    """A node that registered after the cluster was marked moved (it read the
    configuration before) finds the mark right after registering: its join raises
    ClusterMoved and its member record is gone."""
    from nereus.adapters.time_source import SYSTEM_CLOCK
    from nereus.engine.hosting.cluster.cluster_node import ClusterNode
    from nereus.engine.hosting.cluster.node_settings import NodeSettings

    source = initialised_cluster(tmp_path)
    target = sqlite_url(tmp_path / "b.db", "test")
    assert _migrate(source, target, "--yes", home=tmp_path / "op").code == 0
    store = _store(source)
    try:
        node = ClusterNode(engine=None, store=store,  # type: ignore[arg-type]
                           settings=NodeSettings(node_id="late", host="h", address="a"),
                           clock=SYSTEM_CLOCK, events=lambda *a, **k: None)
        with pytest.raises(ClusterMoved):
            node.join()
        assert "late" not in store.members()
    finally:
        store.handle.close()
