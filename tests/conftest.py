"""Shared fixtures: a fresh home, the installed ``nereus`` run as an operator would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NEREUS = shutil.which("nereus", path=str(Path(sys.executable).parent)) or "nereus"


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_nereus(*args: str, home: Path | None = None, env: dict[str, str] | None = None,
               input_text: str | None = None, timeout: float = 120,
               executable: str = NEREUS) -> CliResult:
    """Run the installed ``nereus`` (or ``executable``: another build's, tests/upgrade/)
    in a subprocess with a clean environment. Its engines
    are single daemons (``NEREUS_WORKERS=1``) unless ``env`` or ``--workers`` says
    otherwise: the default, one worker process per core, is shown by the tests of the
    workers, and would make every multi-shard test of this suite pay for more processes."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    environ["NO_COLOR"] = "1"
    environ["COLUMNS"] = "200"
    environ["NEREUS_WORKERS"] = "1"
    if env:
        environ.update(env)
    argv = [executable, *(("--home", str(home)) if home else ()), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=timeout,
                          input=input_text, check=False)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


# a test that uses a real server's fixture carries that server's marker, so the fast lane
# is `pytest -m "not kafka and not pulsar and not s3 and not etcd and not oxia and not
# prometheus"`
_SERVICE_MARKERS = {"kafka_service": "kafka", "kafka_bootstrap": "kafka",
                    "pulsar_service": "pulsar", "s3_service": "s3",
                    "etcd_service": "etcd", "etcd_endpoint": "etcd",
                    "oxia_service": "oxia", "oxia_endpoint": "oxia",
                    "prometheus_tools": "prometheus"}


# the servers parallel workers (pytest-xdist) started, known to the controller when they end
_worker_started: set[str] = set()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """A parallel worker ended (on the controller): note the servers it started."""
    _worker_started.update(getattr(node, "workeroutput", {}).get("nereus_started", ()))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a parallel worker: hand the servers it started to the controller. On the
    controller: stop them, now that no worker uses them."""
    from tests.integration.services import STARTED_BY_WORKER, stop_service

    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["nereus_started"] = list(STARTED_BY_WORKER)
        return
    for name in sorted(_worker_started):
        stop_service(name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture, marker in _SERVICE_MARKERS.items():
            if fixture in names:
                item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An initialised home with one route (``default``, 2 partitions) and lane ``local``."""
    path = tmp_path / "home"
    result = run_nereus("init", "--partitions", "2", home=path)
    assert result.code == 0, result.stderr
    return path


@pytest.fixture
def nereus() -> Callable[..., CliResult]:
    return run_nereus
