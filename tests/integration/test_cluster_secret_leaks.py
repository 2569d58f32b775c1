"""No cluster secret leaves a node: a node on the real secured etcd (TLS, client
certificate, user ``nereus`` with a password) at feature level 2, its route evidence key
sealed in the coordinator under the node's sealing key, set up, started and looked at as
an operator does (``cluster init`` / ``init --join`` with the TLS options, a message
published, ``cluster status``, ``cluster nodes``, ``status``, ``doctor``, ``engine
status``, ``metrics``, ``engine logs``, --json or not, every screen of the dashboard, the
cluster's included); no output and no file of the node's home but the secret files shows
the etcd password, the sealing key, the route's evidence key (in any form) or the client
certificate's private key. Given a wrong etcd password, the CLI, doctor and the cluster
screen say so naming password_file, never showing it."""

from __future__ import annotations

import base64
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import open_cluster
from nereus.adapters.cluster.evidence_seal import SealKey
from nereus.adapters.cluster.home_config import use_coordinator_security
from nereus.adapters.cluster.sealed_keys import open_route_keys, read_sealed
from nereus.config import ClusterSettings
from tests.cli.sealed_homes import ROUTE, Runs, cluster_file, give_seal_key, published
from tests.integration.kafka_service import kafka_bootstrap, kafka_service  # noqa: F401
from tests.integration.secure_services import SecureEtcd
from tests.integration.test_secure_coordinator_cli import flags
from tests.tui.screen_text import cluster_screen, tour_home

pytestmark = [pytest.mark.etcd, pytest.mark.kafka]

LOOKS = (("cluster", "status"), ("cluster", "nodes"), ("status",), ("doctor",),
         ("engine", "status"), ("metrics",), ("engine", "logs"))


def forms(key: bytes) -> list[bytes]:
    """A key as its bytes, its hex (either case) and its base64."""
    return [key, key.hex().encode(), key.hex().upper().encode(), base64.b64encode(key)]


def evidence_keys_in_coordinator(url: str, seal_key: SealKey) -> list[bytes]:
    """The route's evidence keys as the coordinator keeps them, opened with the sealing
    key (the coordinator must hold them sealed only)."""
    handle = open_cluster(url)
    try:
        sealed = read_sealed(ClusterStore(handle), ROUTE)
    finally:
        handle.close()
    assert sealed is not None, "the route's evidence key is sealed in the coordinator"
    opened = open_route_keys(sealed.record, seal_key)
    return [opened.current] + ([] if opened.previous is None else [opened.previous])


def home_files(home: Path) -> bytes:
    """Every byte of every file of ``home`` but its secret files (the sealing key and the
    route's evidence keys)."""
    secret = {home / "seal.key"} | set((home / "secrets").glob("*.evidence-key*"))
    return b"\n".join(path.read_bytes() for path in sorted(home.rglob("*"))
                      if path.is_file() and path not in secret)


def test_a_node_on_the_secured_etcd_shows_no_password_and_no_key_anywhere(
        tmp_path: Path, etcd_secure: SecureEtcd, kafka_bootstrap: str) -> None:  # noqa: F811
    """Set up with the TLS options, sealed at level 2, a message published, every look an
    operator takes (CLI with and without --json, the dashboard's every screen including
    the cluster's): the etcd password, the sealing key and the route's evidence key are in
    no output and no file of the node's home but the secret files; then a wrong password is
    refused by each naming password_file, and is shown by none."""
    cluster = "leak-" + hashlib.blake2b(str(tmp_path).encode(), digest_size=8).hexdigest()
    settings = etcd_secure.cluster_settings(cluster)
    assert settings.password_file is not None
    password = Path(settings.password_file).read_text().strip()
    url, tls = settings.coordinator, flags(settings)
    run, op, node = Runs(), tmp_path / "op", tmp_path / "n1"
    run("--json", "cluster", "init", "--coordinator", url, "--from",
        str(cluster_file(tmp_path, kafka_bootstrap)), "--reason", "first", *tls, home=op)
    run("--json", "init", "--join", url, "--node-id", "n1", *tls, home=node)
    run("--json", "upgrade", "finalize", "--reason", "seal", "--yes", home=node)
    seal_key = SealKey(os.urandom(32))
    give_seal_key(node, seal_key.key.hex())
    run("engine", "start", home=node)
    try:
        run("--json", "message", "schedule", "--lane", "local", "--delay", "0s", "--payload",
            "sealed", "--wait", "--id", "leak-probe", home=node)
        published(node, "leak-probe")
        with ThreadPoolExecutor(4) as looking:  # read-only looks: side by side
            list(looking.map(lambda args: run(*args, home=node),
                             [form for look in LOOKS for form in (look, ("--json", *look))]))
        screens = tour_home(node, lanes=("local",), messages=[("leak-probe", ROUTE)])
    finally:
        run("engine", "stop", home=node)
    assert "n1" in screens["cluster"] and "leader" in screens["cluster"], screens["cluster"]
    use_coordinator_security(settings, home=node)
    evidence = evidence_keys_in_coordinator(url, seal_key)
    assert password and evidence
    wrong = f"wrong-{os.urandom(8).hex()}"
    refused = refused_with(node, etcd_secure, settings, run, wrong)
    assert not [text for text in refused if wrong in text]
    said = "\n".join(run.outputs + list(screens.values())).encode()
    files = home_files(node) + home_files(op)
    assert settings.tls_key_file is not None
    client_key = [line for line in Path(settings.tls_key_file).read_bytes().splitlines()
                  if line and not line.startswith(b"-----")]  # the PEM's base64 lines
    secrets = [password.encode()] + forms(seal_key.key) + [
        form for key in evidence for form in forms(key)] + client_key
    assert not [s for s in secrets if s in said], "a secret in an output or on a screen"
    assert not [s for s in secrets if s in files], "a secret in a file of the home"


def refused_with(node: Path, etcd: SecureEtcd, settings: ClusterSettings,
                 run: Runs, wrong: str) -> list[str]:
    """The node's [cluster] given a wrong etcd password: what ``cluster status``, ``engine
    start``, ``status`` and ``doctor`` say (exit 5, doctor 1) and the dashboard's cluster
    screen shows, each naming password_file."""
    assert settings.password_file is not None
    path = node / "wrong-password"
    path.write_text(wrong + "\n")
    path.chmod(0o600)
    toml = node / "nereus.toml"
    toml.write_text(toml.read_text().replace(settings.password_file, str(path)))
    said = [run(*args, home=node, code=5).stderr for args in (
        ("cluster", "status"), ("engine", "start"))]
    said += [run(*args, home=node, code=code).stdout for args, code in (
        (("--json", "status"), 5), (("--json", "doctor"), 1))]
    cluster = settings.coordinator.rpartition("/")[2]
    use_coordinator_security(etcd.cluster_settings(cluster, password_file=path), home=node)
    said.append(cluster_screen(node, settings.coordinator, "n1"))
    for text in said:
        assert "refused authentication" in text and "password_file" in text, text
    return said
