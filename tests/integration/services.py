"""Real servers for integration tests, started with ``scripts/services`` (no mocks, no Docker).

An adapter is never tested only against a mock, so when its server cannot be started the
tests that need it FAIL, naming what is missing; they never skip. The session fixture
``s3_service`` therefore does not raise: it hands over an ``S3Service`` whose
``require()`` fails the calling test (in its call phase, so it is reported as a failure,
with the script's own explanation) when the server is not there.

The fixture stops the server at the end of the session only if it started it; a server
that was already running (``scripts/services up s3`` by hand, or by ``.ci/run``) is left
running. Endpoint and credentials are read from ``scripts/services env``, which honours the
same ``NEREUS_S3_*`` overrides as ``up``.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "scripts" / "services"
UP_TIMEOUT_S = 900  # a first `up` may fetch the jars from Maven Central
DOWN_TIMEOUT_S = 120


@dataclass(frozen=True, slots=True)
class S3Endpoint:
    """Where the S3-compatible server listens and how to sign requests to it."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str
    region: str

    def client(self) -> Any:
        """A plain boto3 client for the server, for what the tests do behind a store's back."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region,
            aws_access_key_id=self.access_key_id, aws_secret_access_key=self.secret_access_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def remove_bucket(self, bucket: str) -> None:
        """Delete every object of ``bucket``, then the bucket."""
        client = self.client()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=bucket, Key=item["Key"])
        client.delete_bucket(Bucket=bucket)


T = TypeVar("T")


@dataclass(frozen=True)  # not slots: a subscripted generic sets __orig_class__ on its instances
class Service(Generic[T]):
    """The session's server (its address), or why there is none."""

    endpoint: T | None
    error: str | None = None

    def require(self) -> T:
        """The address; fails the calling test if the server could not be started."""
        if self.endpoint is None:
            pytest.fail(self.error or "the service is not available", pytrace=False)
        return self.endpoint


S3Service = Service[S3Endpoint]


# the servers this process started, when it is one of several parallel workers
# (pytest-xdist): another worker may still use them, so the controller stops them once every
# worker has finished (``tests/conftest.py``)
STARTED_BY_WORKER: list[str] = []


def session_service(name: str,
                    start: Callable[[], tuple[Service[T], bool]]) -> Iterator[Service[T]]:
    """The body of a session fixture: ``start`` the server unless it runs, hand it over, and
    stop it at the end only if this session started it (a parallel worker leaves it to the
    controller)."""
    service, started = start()
    try:
        yield service
    finally:
        if started and os.environ.get("PYTEST_XDIST_WORKER"):
            STARTED_BY_WORKER.append(name)
        elif started:
            stop_service(name)


def stop_service(name: str) -> None:
    """``scripts/services down NAME``, which must succeed."""
    down = run_services("down", name, timeout=DOWN_TIMEOUT_S)
    if down.returncode != 0:
        raise RuntimeError(f"`scripts/services down {name}` exited {down.returncode}:"
                           f"\n{_tail(down.stderr)}")


def closed_port() -> int:
    """A local TCP port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def run_services(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``scripts/services ARGS`` with this process's environment (port overrides too)."""
    return subprocess.run([str(SERVICES), *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env=dict(os.environ))


def services_env() -> dict[str, str]:
    """The ``export NAME=value`` lines of ``scripts/services env`` as a dict."""
    proc = run_services("env", timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"`scripts/services env` exited {proc.returncode}: {proc.stderr}")
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep:
            found[name.strip()] = value.strip()
    return found


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


JAVA_NEEDS = ("Needs Java 17+ and, until the jars are cached, Maven (`apt-get install "
              "openjdk-17-jre-headless maven`)")


def cannot_start(service: str, what: str, detail: str, *, needs: str = JAVA_NEEDS) -> str:
    """Why a test of ``what`` cannot run because ``service`` did not start, what the server
    ``needs``, and what to do."""
    return (f"the {service} service could not be started, so {what} cannot be tested against "
            "a real server (a mock is never the only test of an adapter).\n"
            f"{detail}\n"
            f"{needs}; try `scripts/services up {service}` by hand.")


def bring_up(service: str) -> tuple[dict[str, str] | None, bool, str | None]:
    """``scripts/services up SERVICE`` unless it runs.

    Returns (the `scripts/services env` settings, whether this call started it, what went
    wrong); the settings are None exactly when something went wrong.
    """
    try:
        was_running = run_services("status", service, timeout=30).returncode == 0
        up = run_services("up", service, timeout=UP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        return None, False, (f"`scripts/services {' '.join(map(str, exc.cmd[1:]))}` did not "
                             f"finish within {exc.timeout:.0f}s")
    except OSError as exc:
        return None, False, f"cannot run {SERVICES}: {exc}"
    if up.returncode != 0:
        return None, False, (f"`scripts/services up {service}` exited {up.returncode}:\n"
                             f"{_tail(up.stderr)}")
    started = not was_running and "already running" not in up.stderr
    try:
        return services_env(), started, None
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return None, started, f"cannot read `scripts/services env`: {exc!r}"


def _cannot_start(detail: str) -> S3Service:
    return S3Service(None, error=cannot_start("s3", "the S3 object store", detail))


def _start_s3() -> tuple[S3Service, bool]:
    """Start S3Proxy unless it runs; returns the service and whether this call started it."""
    settings, started, problem = bring_up("s3")
    if settings is None:
        return _cannot_start(problem or "unknown problem"), started
    try:
        endpoint = S3Endpoint(
            endpoint_url=settings["NEREUS_S3_ENDPOINT"],
            access_key_id=settings["NEREUS_S3_ACCESS_KEY"],
            secret_access_key=settings["NEREUS_S3_SECRET_KEY"],
            region=settings.get("NEREUS_S3_REGION", "us-east-1"),
        )
    except KeyError as exc:
        return _cannot_start(f"`scripts/services env` has no {exc}"), started
    return S3Service(endpoint), started


@pytest.fixture(scope="session")
def s3_service() -> Iterator[S3Service]:
    """S3Proxy from ``scripts/services``, up for the whole session (stopped only if we started
    it). Call ``require()`` on it to get the endpoint or fail the test."""
    yield from session_service("s3", _start_s3)
