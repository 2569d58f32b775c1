"""A node is the name its operator gave it (issue 38, items 2 and 3): a node run as worker
processes (members ``n2-w0``, ``n2-w1``) is shown, drained, undrained and moved to as
``n2``, its workers under it; a shard whose owner is known gone while its record still
lives is OWNER_LOST with the time its lease has left, not ACTIVE. Run as an operator would
(the installed ``nereus``, ``--json``) against nodes simulated by their records on the
embedded coordinator."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from nereus.cluster.records import Member
from nereus.coordination.protocol import SessionTime
from nereus.engine.hosting.cluster.leader import place_shards
from nereus.engine.runtime.event_log import null_event_log
from nereus.shard import ShardId
from tests.cli.cluster_homes import initialised_cluster, simulated
from tests.conftest import run_nereus
from tests.polling import now_ms


def _json(*args: str, home: Path, code: int = 0) -> Any:
    result = run_nereus("--json", *args, home=home)
    assert result.code == code, (args, result.code, result.stdout, result.stderr)
    assert result.stderr == "", result.stderr
    return result.json()


def test_a_node_of_workers_is_shown_drained_moved_to_and_undrained_by_its_given_id(
        tmp_path: Path) -> None:
    """Node ``n2`` runs two workers and ``n1`` one process: ``cluster status`` and
    ``cluster nodes`` list the nodes ``n1`` and ``n2``, ``n2``'s workers under it with
    their shards; a shard's owner is ``n2`` with its worker beside it. ``shard move --to
    n2`` pins the shard on n2's worker holding fewer shards; ``cluster drain n2`` drains
    it (before: "no node 'n2'"), and the leader then places nothing on its workers;
    ``cluster undrain n2 --yes --reason R`` takes it back (before: no such option)."""
    url = initialised_cluster(tmp_path)
    op = tmp_path / "operator"
    with simulated(url) as cluster:
        n1, w0, w1 = cluster.node("n1"), cluster.node("n2-w0"), cluster.node("n2-w1")
        cluster.lead(w0)
        w0.own("default/0")
        w1.own("default/1")
        n1.own("default/2")
        place_shards(cluster.store, [ShardId("default", p) for p in range(4)],
                     now_ms=now_ms(), events=null_event_log)

        status = _json("cluster", "status", "--coordinator", url, home=op)
        assert status["leader"] == "n2"
        nodes = {row["node_id"]: row for row in status["nodes"]}
        assert sorted(nodes) == ["n1", "n2"], nodes
        n2 = nodes["n2"]
        assert n2["alive"] and n2["leader"] and n2["shards"] == ["default/0", "default/1"]
        assert [(w["worker_id"], w["shards"]) for w in n2["workers"]] == [
            ("n2-w0", ["default/0"]), ("n2-w1", ["default/1"])]
        assert nodes["n1"]["workers"] == []
        shards = {row["shard"]: row for row in status["shards"]}
        assert (shards["default/1"]["owner"], shards["default/1"]["owner_worker"]) == (
            "n2", "n2-w1")
        assert (shards["default/2"]["owner"], shards["default/2"]["owner_worker"]) == (
            "n1", None)
        listed = _json("cluster", "nodes", "--coordinator", url, home=op)
        assert [row["node_id"] for row in listed] == ["n1", "n2"]

        held = {w: sum(1 for p, _ in cluster.store.placements().values() if p.node_id == w)
                for w in ("n2-w0", "n2-w1")}
        fewer = min(held, key=lambda w: (held[w], w))
        moved = _json("shard", "move", "default/3", "--to", "n2", "--reason", "rebalance",
                      "--yes", "--coordinator", url, home=op)
        assert (moved["to"], moved["to_worker"], moved["result"]) == ("n2", fewer, "PLACED")
        assert cluster.store.placements()[ShardId("default", 3)][0].node_id == fewer

        drained = _json("cluster", "drain", "n2", "--reason", "kernel update", "--yes",
                        "--coordinator", url, home=op)
        assert (drained["node_id"], drained["result"]) == ("n2", "DRAINING")
        assert drained["shards"] == ["default/0", "default/1"]
        place_shards(cluster.store, [ShardId("default", p) for p in range(4)],
                     now_ms=now_ms(), events=null_event_log)
        placed = {str(s): p.node_id for s, (p, _) in cluster.store.placements().items()}
        assert set(placed.values()) == {"n1"}, placed
        nodes = {row["node_id"]: row for row in
                 _json("cluster", "nodes", "--coordinator", url, home=op)}
        assert nodes["n2"]["draining"] and all(w["draining"] for w in nodes["n2"]["workers"])
        refused = _json("shard", "move", "default/0", "--to", "n2", "--reason", "back",
                        "--yes", "--coordinator", url, home=op, code=2)
        assert "draining" in refused["error"], refused

        undrained = _json("cluster", "undrain", "n2", "--yes", "--reason", "patched",
                          "--coordinator", url, home=op)
        assert (undrained["node_id"], undrained["undrained"], undrained["reason"]) == (
            "n2", True, "patched")
        assert cluster.store.drains() == {}
        missing = _json("cluster", "drain", "n9", "--reason", "x", "--yes",
                        "--coordinator", url, home=op, code=3)
        assert "n1, n2" in missing["error"], missing


def test_init_join_refuses_a_node_id_that_reads_as_a_worker(tmp_path: Path) -> None:
    """``init --join --node-id db-w1`` is refused (exit 2): it would read as worker 1 of
    a node ``db``."""
    url = initialised_cluster(tmp_path)
    refused = _json("init", "--join", url, "--node-id", "db-w1", home=tmp_path / "db",
                    code=2)
    assert "worker" in refused["error"] and "-w<digits>" in refused["hint"], refused


def test_a_dead_owner_is_owner_lost_with_its_lease_time_left(tmp_path: Path) -> None:
    """An owner on this host whose process is gone, while its session (and so its records)
    still lives: ``cluster status`` shows its shard OWNER_LOST with the time its lease has
    left and why (before: ACTIVE until the lease ended); a live owner's shard is ACTIVE."""
    url = initialised_cluster(tmp_path)
    op = tmp_path / "operator"
    gone = subprocess.Popen(["true"])
    gone.wait()
    with simulated(url) as cluster:
        live = cluster.node("n1")
        live.own("default/0")
        dead = cluster.node("n2", member=False)
        cluster.store.register(dead.session, Member(
            node_id="n2", host="localhost", address="/nowhere/admin.sock", pid=gone.pid))
        dead.own("default/1")
        shards = {row["shard"]: row for row in
                  _json("cluster", "status", "--coordinator", url, home=op)["shards"]}
    lost = shards["default/1"]
    assert (lost["state"], lost["owner"]) == ("OWNER_LOST", "n2"), lost
    assert 0 < lost["lease_left_ms"] <= 10_000, lost
    assert f"pid {gone.pid}" in lost["detail"], lost
    assert shards["default/0"]["state"] == "ACTIVE"
    assert shards["default/0"]["lease_left_ms"] > 0


def test_an_owner_whose_session_went_silent_is_lost() -> None:
    """The lease rule alone (a remote owner): a session with more than one and a half
    heartbeat intervals gone without a heartbeat is lost, with its time left; one within
    an interval of its TTL is not."""
    from nereus.adapters.cluster.liveness import judge

    member = Member(node_id="n3", host="elsewhere", address="/a.sock", pid=1)
    fresh = judge(SessionTime(left_ms=7_000, ttl_ms=10_000, heartbeats_per_ttl=3), member)
    assert not fresh.lost and fresh.lease_left_ms == 7_000
    silent = judge(SessionTime(left_ms=4_000, ttl_ms=10_000, heartbeats_per_ttl=3), member)
    assert silent.lost and silent.lease_left_ms == 4_000 and "6 s" in (silent.why or "")
    assert not judge(None, member).lost
