"""``nereus cluster reseal-evidence-keys`` as an operator meets it after a sealing key leak,
on the real etcd and Kafka: the routes' evidence keys are sealed again under a new sealing
key while a node runs (it keeps publishing, says which keys it holds, takes the new key
from its file without a restart), ``doctor`` warns while a node lacks it, a node started
with only the old key is refused naming the setting, and no key is in any output or log."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import open_cluster
from nereus.adapters.cluster.evidence_seal import key_id_of
from nereus.adapters.cluster.sealed_keys import read_sealed
from nereus.adapters.home.route_secrets import evidence_keys
from nereus.evidence_mac import evidence_mac
from tests.cli.sealed_homes import ROUTE, Runs, cluster_file, give_seal_key, published
from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.kafka_service import kafka_bootstrap, kafka_service  # noqa: F401
from tests.polling import wait_until


def _sealed_under(url: str) -> str:
    handle = open_cluster(url)
    try:
        found = read_sealed(ClusterStore(handle), ROUTE)
        assert found is not None
        return found.record.key_id
    finally:
        handle.close()


def _key_file(path: Path, key_hex: str) -> Path:
    """``key_hex`` written to ``path`` (mode 0600), replacing what it held."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, (key_hex + "\n").encode())
    os.close(fd)
    return path


def _mac(key: bytes, record: dict[str, Any]) -> str:
    return evidence_mac(key, record["delay_message_id"], record["generation"],
                        record["attempt_id"])


def test_a_reseal_keeps_a_running_node_publishing_and_an_old_key_node_is_refused(
        etcd_endpoint: EtcdEndpoint, tmp_path: Path,  # noqa: F811
        kafka_bootstrap: str) -> None:  # noqa: F811
    """A dry run writes nothing; the re-seal puts the route's keys under the new sealing
    key; the running node keeps publishing with the same evidence key and doctor warns
    that it holds only the old sealing key; once its key file holds the new key it takes
    it without a restart (`cluster nodes` shows it); restarted with only the old key it is
    refused naming the setting and both fingerprints; with the new key (after a rotation
    made while it was down) it starts, says it signs with generation 2 and publishes with
    the rotated key; no key in any output or log."""
    run, op, node = Runs(), tmp_path / "op", tmp_path / "n1"
    url = f"etcd://{etcd_endpoint.host}:{etcd_endpoint.port}/rs{uuid.uuid4().hex[:10]}"
    old_hex, new_hex = os.urandom(32).hex(), os.urandom(32).hex()
    old_id, new_id = key_id_of(bytes.fromhex(old_hex)), key_id_of(bytes.fromhex(new_hex))
    run("--json", "cluster", "init", "--coordinator", url, "--from",
        str(cluster_file(tmp_path, kafka_bootstrap)), "--reason", "first", home=op)
    run("--json", "upgrade", "finalize", "--coordinator", url, "--reason", "seal", "--yes",
        home=op)
    run("--json", "init", "--join", url, "--node-id", "n1", home=node)
    give_seal_key(node, old_hex)
    new_file = _key_file(tmp_path / "new-seal.key", new_hex)
    schedule = ("--json", "message", "schedule", "--lane", "local", "--delay", "0s",
                "--payload", "x", "--wait", "--id")
    reseal = ("--json", "cluster", "reseal-evidence-keys", "--new-key-file", str(new_file),
              "--reason", "leaked", "--yes")

    def holds() -> dict[str, Any]:
        [row] = run("--json", "cluster", "nodes", home=node).json()
        return {"seal": row["seal_key_ids"], "generations": row["evidence_key_generations"]}

    def doctor_keys() -> dict[str, Any]:
        checks = run("--json", "doctor", home=node).json()["checks"]
        [found] = [c for c in checks if c["name"] == "evidence_keys"]
        return dict(found)

    run("engine", "start", home=node)
    try:
        run(*schedule, "before", home=node)
        before = published(node, "before")
        key = evidence_keys(node, ROUTE, create=False).current
        dry = run(*reseal, "--dry-run", home=node).json()
        assert (dry["result"], dry["seal_key_id"], dry["old_seal_key_ids"]) == \
            ("DRY_RUN", new_id, [old_id])
        assert [(r["action"], r["was_seal_key_id"]) for r in dry["routes"]] == \
            [("RESEALED", old_id)]
        assert _sealed_under(url) == old_id, "a dry run writes nothing"
        assert run(*reseal, home=node).json()["result"] == "RESEALED"
        assert _sealed_under(url) == new_id
        run(*schedule, "during", home=node)
        during = published(node, "during")
        assert (before["mac"], during["mac"]) == (_mac(key, before), _mac(key, during))
        lacking = doctor_keys()  # n1 says it holds the old key
        assert not lacking["ok"] and "node n1" in lacking["detail"] and \
            f"sealing key {new_id}" in lacking["detail"] and old_id in lacking["detail"], lacking
        _key_file(node / "seal.key", new_hex)
        wait_until("the running node took the new sealing key", lambda: holds() == {
            "seal": [new_id], "generations": {ROUTE: 1}}, 30)
    finally:
        run("engine", "stop", home=node)
    _key_file(node / "seal.key", old_hex)  # a node given only the old key after the re-seal
    refused = run("engine", "start", home=node, code=1)
    assert "[cluster] evidence_seal_key_file" in refused.stderr
    assert new_id in refused.stderr and old_id in refused.stderr, refused.stderr
    _key_file(node / "seal.key", new_hex)
    run("--json", "cluster", "rotate-evidence-key", "--reason", "after the leak", "--yes",
        home=node)
    run("engine", "start", home=node)
    try:
        wait_until("the restarted node says it signs with generation 2", lambda: holds() == {
            "seal": [new_id], "generations": {ROUTE: 2}}, 30)
        run(*schedule, "after", home=node)
        after = published(node, "after")
    finally:
        run("engine", "stop", home=node)
    ring = evidence_keys(node, ROUTE, create=False)
    assert (ring.previous, after["mac"]) == (key, _mac(ring.current, after))
    secrets = [old_hex, new_hex, key.hex(), ring.current.hex()]
    logs = [p.read_text(errors="replace") for p in (node / "log").rglob("*") if p.is_file()]
    assert logs, "the engines wrote logs"
    assert not [s for s in secrets for out in run.outputs + logs if s in out.lower()]
