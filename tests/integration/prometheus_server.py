"""A real Prometheus server and promtool for the metrics tests, from Debian's `prometheus`
package (``scripts/fetch-prometheus`` finds them on PATH or unpacks the package into the
services cache, as ``scripts/services`` does for etcd; ``.ci/run`` runs it first).

Like the other real servers, a missing Prometheus FAILS the tests that need it, naming
what is missing: they never skip. Every server a test starts is owned by ``prometheus``
(a context manager): it is stopped, SIGKILLed if it must be, on the way out.
"""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "scripts" / "fetch-prometheus"


def tools_dir() -> Path:
    """The directory with ``prometheus`` and ``promtool``; fails the test if there is none."""
    done = subprocess.run([str(FETCH)], capture_output=True, text=True, timeout=600,
                          check=False)
    if done.returncode != 0:
        pytest.fail(f"Prometheus is needed and could not be had: {done.stderr.strip()} "
                    "(scripts/fetch-prometheus: Debian's prometheus package through apt-get "
                    "download; or put prometheus and promtool on PATH, or set "
                    "NEREUS_PROMETHEUS_DIR)", pytrace=False)
    return Path(done.stdout.strip())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Prometheus:
    """A running Prometheus's HTTP API."""

    url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant query's result vector (empty when no series match)."""
        address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        with urllib.request.urlopen(address, timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def targets_up(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=5) as answer:
                body = json.load(answer)
        except OSError:
            return False
        active = body["data"]["activeTargets"]
        return bool(active) and all(target["health"] == "up" for target in active)


@contextmanager
def prometheus(tools: Path, workdir: Path, target: str) -> Iterator[Prometheus]:
    """Prometheus scraping ``target`` (HOST:PORT) every second, on a free loopback port,
    its data in ``workdir``; stopped on the way out."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: nereus\n    static_configs:\n"
        f"      - targets: ['{target}']\n")
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [str(tools / "prometheus"), f"--config.file={config}",
         f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        yield Prometheus(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()

