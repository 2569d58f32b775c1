"""The cluster's operator commands on the embedded coordinator (no service): ``cluster
init|config|status|nodes|drain|undrain``, ``init --join`` and ``shard move``, run as an
operator would (a subprocess, ``--json``), against nodes simulated by their records."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import open_cluster
from nereus.adapters.home.route_secrets import key_path
from nereus.cluster.records import OwnerState, Placement
from nereus.shard import ShardId
from tests.cli.cluster_homes import cluster_file, initialised_cluster, simulated
from tests.conftest import NEREUS, run_nereus
from tests.polling import wait_until


def _json(*args: str, home: Path, code: int = 0) -> Any:
    result = run_nereus("--json", *args, home=home)
    assert result.code == code, (args, result.code, result.stdout, result.stderr)
    return result.json()


def _store_secrets(url: str) -> dict[str, str]:
    handle = open_cluster(url)
    try:
        return {route: s.evidence_key for route, s in ClusterStore(handle).route_secrets().items()}
    finally:
        handle.close()


def test_cluster_init_writes_the_configuration_once_and_replace_keeps_partitions(
        tmp_path: Path) -> None:
    """``cluster init`` writes revision 1 and the route's evidence key; a second init is
    refused; ``--replace`` needs a reason, refuses a partition change, and otherwise writes
    revision 2; ``cluster config`` shows the record and both audit entries."""
    url = initialised_cluster(tmp_path, cli=True)
    op = tmp_path / "operator"
    again = _json("cluster", "init", "--coordinator", url, "--from",
                  str(cluster_file(tmp_path)), home=op, code=1)
    assert "configuration already" in again["error"] and "--replace" in again["hint"]
    no_reason = _json("cluster", "init", "--coordinator", url, "--from",
                      str(cluster_file(tmp_path)), "--replace", home=op, code=2)
    assert "--reason" in no_reason["error"]
    wider = tmp_path / "wider"
    wider.mkdir()
    refused = _json("cluster", "init", "--coordinator", url, "--from",
                    str(cluster_file(wider, partitions=8)), "--replace", "--reason", "more",
                    home=op, code=2)
    assert "partitions would change from 4 to 8" in refused["error"], refused
    text = cluster_file(tmp_path).read_text() + (
        '\n[lanes.audit]\ndestination = "file"\npath = "outbox/audit.jsonl"\n')
    (tmp_path / "more-lanes.toml").write_text(text)
    replaced = _json("cluster", "init", "--coordinator", url, "--from",
                     str(tmp_path / "more-lanes.toml"), "--replace", "--reason", "audit lane",
                     "--as", "alice", home=op)
    assert {k: replaced[k] for k in ("revision", "changed_by", "reason", "replaced")} == {
        "revision": 2, "changed_by": "alice", "reason": "audit lane", "replaced": True}
    assert [lane["lane"] for lane in replaced["lanes"]] == ["local", "audit"]
    assert replaced["new_evidence_keys"] == []  # the route kept its key
    shown = _json("cluster", "config", "--coordinator", url, home=op)
    assert shown["revision"] == 2 and "[lanes.audit]" in shown["toml"]
    assert [(a["revision"], a["changed_by"], a["reason"]) for a in shown["audit"]] == [
        (1, shown["audit"][0]["changed_by"], "first"), (2, "alice", "audit lane")]
    assert list(_store_secrets(url)) == ["default"]


def test_cluster_init_refuses_a_route_on_the_file_log(tmp_path: Path) -> None:
    """A cluster's routes are on a broker: a file-log route is refused (exit 2), and the
    coordinator is left without a configuration."""
    bad = tmp_path / "file.toml"
    bad.write_text(cluster_file(tmp_path).read_text().replace('log = "kafka"', 'log = "file"'))
    url = f"sqlite://{tmp_path}/coord.db/test"
    refused = _json("cluster", "init", "--coordinator", url, "--from", str(bad),
                    home=tmp_path / "op", code=2)
    assert "kafka" in refused["hint"]
    missing = _json("cluster", "config", "--coordinator", url, home=tmp_path / "op", code=3)
    assert "cluster init" in missing["hint"]


def test_init_join_makes_a_node_home_with_the_clusters_evidence_key(tmp_path: Path) -> None:
    """``init --join`` writes a private home whose nereus.toml holds only [cluster], and the
    route's evidence key from the coordinator (0600): two nodes hold the same key. The home
    then loads the cluster's routes (``cluster status`` and ``cluster config`` work from it
    without --coordinator)."""
    url = initialised_cluster(tmp_path)
    keys = []
    for node in ("n1", "n2"):
        home = tmp_path / node
        joined = _json("init", "--join", url, "--node-id", node, "--capacity", "2", home=home)
        assert (joined["node_id"], joined["capacity"], joined["revision"]) == (node, 2, 1)
        assert joined["shards"] == [f"default/{p}" for p in range(4)]
        assert joined["evidence_keys"] == ["default"]
        text = (home / "nereus.toml").read_text()
        assert "[cluster]" in text and "[routes" not in text and "[lanes" not in text
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        key = key_path(home, "default")
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        keys.append(key.read_text().strip())
    assert keys[0] == keys[1] == _store_secrets(url)["default"]
    status = _json("cluster", "status", home=tmp_path / "n1")
    assert status["coordinator"] == url and len(status["shards"]) == 4
    assert _json("cluster", "config", home=tmp_path / "n2")["revision"] == 1


def test_init_join_refusals(tmp_path: Path) -> None:
    """A cluster with no configuration (exit 3, naming `cluster init`), standalone options
    with --join (exit 2), --node-id without --join (exit 2) and a node id a live node holds
    (exit 1) are refused, and leave no nereus.toml behind."""
    blank = f"sqlite://{tmp_path}/blank.db/test"
    home = tmp_path / "node"
    none = _json("init", "--join", blank, "--node-id", "n1", home=home, code=3)
    assert "cluster init --coordinator" in none["hint"]
    url = initialised_cluster(tmp_path)
    mixed = _json("init", "--join", url, "--node-id", "n1", "--partitions", "3", "--log",
                  "kafka", home=home, code=2)
    assert "--partitions, --log cannot go with --join" in mixed["error"]
    alone = _json("init", "--node-id", "n1", home=home, code=2)
    assert "--join" in alone["error"]
    with simulated(url) as cluster:
        cluster.node("n1")
        taken = _json("init", "--join", url, "--node-id", "n1", home=home, code=1)
    assert "already in use by a live node" in taken["error"], taken
    assert not (home / "nereus.toml").exists()


def test_cluster_status_reports_nodes_and_the_state_of_each_shard(tmp_path: Path) -> None:
    """Owner records make ACTIVE, RECOVERING and MOVING shards (released, or placed on
    another node); a shard without one is UNOWNED. A node with a member record is alive;
    one named only by an ownership record is listed, not alive. ``cluster nodes`` prints
    the same nodes."""
    url = initialised_cluster(tmp_path, partitions=5)
    op = tmp_path / "op"
    with simulated(url) as cluster:
        n1, n2 = cluster.node("n1"), cluster.node("n2", capacity=3)
        ghost = cluster.node("ghost", member=False)
        cluster.lead(n1)
        n1.own("default/0")
        n1.own("default/1", OwnerState.RECOVERING)
        n1.own("default/2", OwnerState.RELEASING)
        n2.own("default/3")
        ghost.own("default/4")
        cluster.store.place(ShardId("default", 3),
                            Placement(shard="default/3", node_id="n1"), expected=None)
        status = _json("cluster", "status", "--coordinator", url, home=op)
        nodes = _json("cluster", "nodes", "--coordinator", url, home=op)
    assert list(status) == ["cluster", "coordinator", "leader", "nodes", "shards"]
    assert (status["cluster"], status["leader"]) == ("test", "n1")
    states = {row["shard"]: (row["owner"], row["state"]) for row in status["shards"]}
    assert states == {"default/0": ("n1", "ACTIVE"), "default/1": ("n1", "RECOVERING"),
                      "default/2": ("n1", "MOVING"), "default/3": ("n2", "MOVING"),
                      "default/4": ("ghost", "ACTIVE")}
    assert all(isinstance(row["epoch"], int) and row["epoch"] > 0 for row in status["shards"])
    by_node = {row["node_id"]: row for row in status["nodes"]}
    assert {n: (r["alive"], r["shards"]) for n, r in by_node.items()} == {
        "ghost": (False, ["default/4"]), "n1": (True, ["default/0", "default/1", "default/2"]),
        "n2": (True, ["default/3"])}
    assert by_node["n2"]["capacity"] == 3 and by_node["ghost"]["address"] is None
    assert by_node["n1"]["address"] == "/nodes/n1/run/admin.sock"
    assert nodes == status["nodes"]
    after = _json("cluster", "status", "--coordinator", url, home=op)  # sessions closed
    assert {row["state"] for row in after["shards"]} == {"UNOWNED"} and after["leader"] is None


def test_cluster_status_needs_a_cluster_and_a_reachable_coordinator(tmp_path: Path) -> None:
    """From a home that is no node, without --coordinator: exit 2 naming the fix; a coordinator
    that does not answer: exit 5 (ServiceUnreachable)."""
    home = tmp_path / "no-home"
    which = _json("cluster", "status", home=home, code=2)
    assert "--coordinator" in which["hint"]
    down = _json("cluster", "status", "--coordinator", "etcd://127.0.0.1:1/x", home=home, code=5)
    assert "etcd" in down["error"]


def _placement(store: ClusterStore, shard: str) -> Placement | None:
    found = store.placements().get(ShardId.parse(shard))
    return None if found is None else found[0]


def test_shard_move_checks_its_target_pins_the_placement_and_waits(tmp_path: Path) -> None:
    """--dry-run writes nothing; an unknown or draining node is refused; without a terminal
    and without --yes it is refused; the move pins the placement with who and why; --wait
    ends MOVED once the target's record is ACTIVE, and NOT_YET (exit 6) when it is not."""
    url = initialised_cluster(tmp_path)
    op = tmp_path / "op"
    move = ("shard", "move", "default/1", "--coordinator", url, "--reason", "rebalance")
    with simulated(url) as cluster:
        n1, n2 = cluster.node("n1"), cluster.node("n2")
        cluster.node("n3")
        n1.own("default/1")
        dry = _json(*move, "--to", "n2", "--dry-run", home=op)
        assert (dry["result"], dry["owner"], dry["state"]) == ("DRY_RUN", "n1", "ACTIVE")
        assert _placement(cluster.store, "default/1") is None
        assert "no live node 'n9'" in _json(*move, "--to", "n9", "--yes", home=op,
                                            code=3)["error"]
        _json("cluster", "drain", "n3", "--coordinator", url, "--reason", "r", "--yes", home=op)
        assert "draining" in _json(*move, "--to", "n3", "--yes", home=op, code=2)["error"]
        assert "--yes" in _json(*move, "--to", "n2", home=op, code=2)["hint"]
        argv = [NEREUS, "--json", *move, "--to", "n2", "--yes", "--wait", "20", "--as", "bob"]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as waiting:
            wait_until("the pinned placement", lambda: _placement(cluster.store, "default/1")
                       is not None, 20)
            n1.release("default/1")
            n2.own("default/1")
            out, _ = waiting.communicate(timeout=30)
        assert waiting.returncode == 0, out
        moved = json.loads(out)
        assert (moved["result"], moved["state"], moved["operator"]) == ("MOVED", "ACTIVE", "bob")
        placed = _placement(cluster.store, "default/1")
        assert placed is not None
        assert (placed.node_id, placed.pinned, placed.operator, placed.reason) == (
            "n2", True, "bob", "rebalance")
        late = _json(*move, "--to", "n1", "--yes", "--wait", "0.3", home=op, code=6)
    assert (late["result"], late["state"]) == ("NOT_YET", "MOVING")


def test_drain_waits_until_the_node_owns_nothing_and_undrain_takes_it_back(
        tmp_path: Path) -> None:
    """``cluster drain --wait`` ends DRAINED once the node's ownership records are gone,
    status shows it draining; ``undrain`` removes the drain (and says when there was none)."""
    url = initialised_cluster(tmp_path)
    op = tmp_path / "op"
    with simulated(url) as cluster:
        n1 = cluster.node("n1")
        cluster.node("n2")
        n1.own("default/0")
        n1.own("default/2")
        argv = [NEREUS, "--json", "cluster", "drain", "n1", "--coordinator", url, "--reason",
                "kernel update", "--yes", "--wait", "20"]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as waiting:
            wait_until("the drain record", lambda: "n1" in cluster.store.drains(), 20)
            assert _json("cluster", "nodes", "--coordinator", url, home=op)[0]["draining"]
            n1.release("default/0")  # one shard at a time, as the node lets them go
            n1.release("default/2")
            out, _ = waiting.communicate(timeout=30)
        assert waiting.returncode == 0, out
        drained = json.loads(out)
        assert (drained["result"], drained["shards"], drained["reason"]) == (
            "DRAINED", [], "kernel update")
        undrained = _json("cluster", "undrain", "n1", "--coordinator", url, home=op)
        assert (undrained["node_id"], undrained["undrained"]) == ("n1", True)
        again = _json("cluster", "undrain", "n1", "--coordinator", url, home=op)
        assert again["undrained"] is False
