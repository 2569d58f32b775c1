"""``nereus cluster rotate-evidence-key`` and sealed route keys as an operator meets them,
on the real etcd and Oxia: refused below feature level 2 and without the sealing key; a
rotation seals the cluster's plain key and replaces it; a node without the sealing key is
refused at start naming the setting, one with it installs the new key and keeps the old one
verifying (and a running node takes a rotated key without a restart); no key appears in
anything the commands print."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import open_cluster
from nereus.adapters.home.route_secrets import evidence_keys
from nereus.cluster import keys
from nereus.coordination.errors import KeyNotFound
from nereus.evidence_mac import evidence_mac, mac_accepted
from tests.cli.sealed_homes import Runs, cluster_file, give_seal_key, published
from tests.conftest import run_nereus
from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.kafka_service import kafka_bootstrap, kafka_service  # noqa: F401
from tests.integration.oxia_service import (  # noqa: F401
    OxiaEndpoint,
    oxia_endpoint,
    oxia_service,
)
from tests.polling import now_ms, wait_until

ROUTE = "default"


@pytest.fixture(params=["etcd", "oxia"])
def url(request: pytest.FixtureRequest) -> str:
    """A fresh cluster's URL on the real etcd or Oxia."""
    name = f"rot{uuid.uuid4().hex[:10]}"
    if request.param == "etcd":
        etcd: EtcdEndpoint = request.getfixturevalue("etcd_endpoint")
        return f"etcd://{etcd.host}:{etcd.port}/{name}"
    oxia: OxiaEndpoint = request.getfixturevalue("oxia_endpoint")
    return oxia.url(name)


def _plain_record(url: str) -> bytes | None:
    handle = open_cluster(url)
    try:
        store = ClusterStore(handle)
        try:
            return handle.coordinator.get(store.key(keys.secret_key(ROUTE))).value
        except KeyNotFound:
            return None
    finally:
        handle.close()


def test_a_rotation_seals_replaces_and_keeps_the_old_key_verifying_and_nothing_leaks(
        url: str, tmp_path: Path, kafka_bootstrap: str) -> None:  # noqa: F811
    """Below level 2 the rotation is refused (exit 1); without the sealing key too (exit
    2, naming the setting); then the plain key is sealed and rotated, the plain record is
    gone, a second rotation during the grace is refused (exit 1); a node without the
    sealing key does not start, naming the setting; with it, its home signs with the new
    key and the old key's evidence still verifies; no key is in any output or log."""
    run, op, node = Runs(), tmp_path / "op", tmp_path / "n1"
    seal_hex = os.urandom(32).hex()
    run("--json", "cluster", "init", "--coordinator", url, "--from",
        str(cluster_file(tmp_path, kafka_bootstrap)), "--reason", "first", home=op)
    rotate = ("--json", "cluster", "rotate-evidence-key", "--reason", "scheduled", "--yes")
    without = run(*rotate, "--coordinator", url, home=op, code=2)
    assert "evidence_seal_key_file" in without.stdout
    give_seal_key(op, seal_hex)
    below = run(*rotate, "--coordinator", url, "--seal-key-file", str(op / "seal.key"),
                home=op, code=1)
    assert "upgrade finalize" in below.stdout
    run("--json", "upgrade", "finalize", "--coordinator", url, "--reason", "seal", "--yes",
        home=op)
    run("--json", "init", "--join", url, "--node-id", "n1", home=node)
    old = evidence_keys(node, ROUTE, create=False).current
    run(*rotate, home=node, code=2)  # no sealing key in the node's [cluster]
    give_seal_key(node, seal_hex)
    dry = run(*rotate, "--dry-run", home=node).json()
    assert (dry["result"], dry["routes"][0]["generation"]) == ("DRY_RUN", 2)
    assert _plain_record(url) is not None, "a dry run writes nothing"
    done = run(*rotate, home=node).json()
    assert (done["result"], done["routes"][0]["previous_generation"]) == ("ROTATED", 1)
    assert _plain_record(url) is None
    again = run(*rotate, home=node, code=1)
    assert "verifies until" in again.stdout
    other = tmp_path / "n2"
    run("--json", "init", "--join", url, "--node-id", "n2", home=other)
    refused = run("engine", "start", home=other, code=1)
    assert "[cluster] evidence_seal_key_file is not set" in refused.stderr
    run("engine", "start", home=node)
    run("engine", "stop", home=node)
    ring = evidence_keys(node, ROUTE, create=False)
    assert ring.current != old and ring.previous == old
    assert mac_accepted(evidence_mac(old, "m", 1, "a"), ring.expected(now_ms(), "m", 1, "a"))
    secrets = [old.hex(), ring.current.hex(), seal_hex]
    logs = [p.read_text(errors="replace") for home in (node, other)
            for p in (home / "log").rglob("*") if p.is_file()]
    assert logs, "the engines wrote logs"
    assert not [s for s in secrets for out in run.outputs + logs if s in out.lower()]


def test_a_running_node_signs_with_the_rotated_key_and_earlier_evidence_still_verifies(
        etcd_endpoint: EtcdEndpoint, tmp_path: Path,  # noqa: F811
        kafka_bootstrap: str) -> None:  # noqa: F811
    """A record published before the rotation carries the old key's MAC; the running node
    takes the new key within its rounds (no restart), and a record published after
    carries the new key's MAC (not the old's); during the grace both verify."""
    run, op, node = Runs(), tmp_path / "op", tmp_path / "n1"
    url = f"etcd://{etcd_endpoint.host}:{etcd_endpoint.port}/rot{uuid.uuid4().hex[:10]}"
    run("--json", "cluster", "init", "--coordinator", url, "--from",
        str(cluster_file(tmp_path, kafka_bootstrap)), "--reason", "first", home=op)
    run("--json", "upgrade", "finalize", "--coordinator", url, "--reason", "seal", "--yes",
        home=op)
    run("--json", "init", "--join", url, "--node-id", "n1", home=node)
    give_seal_key(node, os.urandom(32).hex())
    schedule = ("--json", "message", "schedule", "--lane", "local", "--delay", "0s",
                "--payload", "x", "--wait", "--id")
    run("engine", "start", home=node)
    try:
        run(*schedule, "before", home=node)
        before = published(node, "before")
        old = evidence_keys(node, ROUTE, create=False).current
        run("--json", "cluster", "rotate-evidence-key", "--reason", "r", "--yes", home=node)
        wait_until("the running node took the new key", lambda: evidence_keys(
            node, ROUTE, create=False).current != old, 30)
        run(*schedule, "after", home=node)
        after = published(node, "after")
    finally:
        run("engine", "stop", home=node)
    ring = evidence_keys(node, ROUTE, create=False)
    assert ring.previous is not None

    def mac(key: bytes, record: dict[str, Any]) -> str:
        return evidence_mac(key, record["delay_message_id"], record["generation"],
                            record["attempt_id"])

    assert (before["mac"], after["mac"]) == (mac(ring.previous, before), mac(ring.current, after))
    assert after["mac"] != mac(ring.previous, after)
    for record in (before, after):
        assert mac_accepted(record["mac"], ring.expected(
            now_ms(), record["delay_message_id"], record["generation"], record["attempt_id"]))


def test_doctor_checks_the_sealing_key_file_and_never_shows_it(tmp_path: Path) -> None:
    """``doctor`` on a node refuses a sealing key file others may read (naming the file and
    the fix) and says where a private one is read from, never its value."""
    from tests.cli.cluster_homes import initialised_cluster

    node, seal_hex = tmp_path / "n1", os.urandom(32).hex()
    url = initialised_cluster(tmp_path)
    run_nereus("--json", "init", "--join", url, "--node-id", "n1", home=node)
    give_seal_key(node, seal_hex)
    (node / "seal.key").chmod(0o644)

    def seal_check() -> dict[str, Any]:
        result = run_nereus("--json", "doctor", home=node)
        assert seal_hex not in result.stdout + result.stderr
        found = [c for c in result.json()["checks"] if "evidence_seal_key" in c["detail"]]
        assert len(found) == 1, result.stdout
        return dict(found[0])

    loose = seal_check()
    assert (loose["ok"], loose["fix"]) == (False, f"chmod 600 {node / 'seal.key'}"), loose
    (node / "seal.key").chmod(0o600)
    assert seal_check()["detail"] == "evidence_seal_key read from the file seal.key"
