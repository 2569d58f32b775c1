"""``docs/cluster.md``'s one-host walk-through works as written (issue 38, item 1): its
shell blocks, in order, by ``bash -e`` with the installed ``nereus`` on the PATH, against
the session's etcd, Kafka and S3 — only ``DEMO`` (the homes' folder) and ``CLUSTER`` (a
fresh name a run, so its topics and S3 prefix are new) are changed. Whatever it started is
stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.kafka_service import kafka_bootstrap, kafka_service  # noqa: F401
from tests.integration.services import S3Service, s3_service  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
NODES = ("n1", "n2", "n3")
SETTINGS = "export DEMO=/tmp/nereus-demo CLUSTER=demo\n"

pytestmark = pytest.mark.timeout(480)


def walkthrough() -> str:
    """The walk-through's shell blocks, in order."""
    text = (ROOT / "docs" / "cluster.md").read_text()
    section = text.split("## Walk-through: three nodes on one host", 1)[1]
    section = section.split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) >= 6 and blocks[0].startswith(SETTINGS), blocks[:1]
    return "".join(blocks)


def _stop(home: Path) -> None:
    """Stop a node's engine, or kill it by its pid file if that does not work."""
    nereus = str(ROOT / ".venv" / "bin" / "nereus")
    stopped = subprocess.run([nereus, "--home", str(home), "engine", "stop", "--timeout",
                              "30"], capture_output=True, timeout=90, check=False)
    pid_file = home / "run" / "engine.pid"
    if stopped.returncode != 0 and pid_file.exists():
        with contextlib.suppress(ValueError, ProcessLookupError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)


def test_the_one_host_cluster_walkthrough_runs_as_written(
        tmp_path: Path, etcd_endpoint: EtcdEndpoint, kafka_bootstrap: str,  # noqa: F811
        s3_service: S3Service) -> None:  # noqa: F811
    """Every command of the walk-through exits 0: three nodes join, every shard becomes
    ACTIVE, a message scheduled through n1 is applied and shown from n2, ``status`` on n1
    says it shows that node's shards, a shard moves to n2, n3 is drained and undrained,
    n3 is killed and the others stopped."""
    s3_service.require()
    demo = tmp_path / "demo"
    cluster = f"walk-{uuid.uuid4().hex[:10]}"
    script = "set -euo pipefail\n" + walkthrough().replace(
        SETTINGS, f"export DEMO={demo} CLUSTER={cluster}\n", 1)
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("NEREUS_", "VIRTUAL_ENV"))}
    environ["PATH"] = f"{ROOT / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    try:
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=environ,
                              capture_output=True, text=True, timeout=420, check=False)
        said = done.stdout + done.stderr
        assert done.returncode == 0, said[-6_000:]
        assert "SCHEDULE order-1 APPLIED" in done.stdout, said[-3_000:]
        assert "order-1 on default/" in done.stdout
        assert "node n1 of a cluster: its 2 shard(s) of the cluster's 6" in done.stdout
        assert "moved shard default/0 -> n2" in done.stdout
        assert "drained node n3" in done.stdout and "node n3 may own shards again" in \
            done.stdout
        for node in NODES:
            assert (demo / node / "nereus.toml").exists()
    finally:
        for node in NODES:
            if (demo / node).exists():
                _stop(demo / node)
