"""A home is private whatever the umask: the home 0700, every file the CLI and the engine
write 0600 (directories 0700); ``doctor`` names what is wider and how to fix it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_nereus
from tests.daemon import read_outbox, running_engine
from tests.polling import wait_until


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """The careless default of many hosts: files 0644, directories 0755."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _wider_than_private(root: Path) -> list[str]:
    found = []
    for directory, _, files in os.walk(root):
        for path in (Path(directory), *(Path(directory) / name for name in files)):
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & 0o077:
                found.append(f"{path.relative_to(root)} {mode:04o}")
    return found


@pytest.mark.usefixtures("permissive_umask")
def test_everything_the_engine_and_cli_write_is_private_under_umask_022(tmp_path: Path) -> None:
    """Under umask 022, everything init, the engine, a publish and digest write is private."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    with running_engine(home):
        queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "0s",
                            "--payload", "secret", "--id", "private-1", "--wait", home=home)
        assert queued.code == 0, queued.stderr
        wait_until("the message published to the outbox",
                   lambda: read_outbox(home / "outbox" / "local.jsonl") or None, 30)
        assert run_nereus("shard", "digest", "default/0", home=home).code == 0
    # the shard log, RocksDB, the outbox, the engine log, nereus.toml, the secrets, run/
    for part in ("nereus.toml", "shardlog", "state", "outbox", "log", "secrets"):
        assert (home / part).exists(), part
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert _wider_than_private(home) == []


def test_doctor_reports_wider_modes_and_the_fix(home: Path) -> None:
    """doctor names files others may read and the fix; a readable nereus.toml fails it, other
    files only warn."""
    healthy = run_nereus("--json", "doctor", home=home).json()
    check = next(c for c in healthy["checks"] if c["name"] == "permissions")
    assert check["ok"], check
    (home / "nereus.toml").chmod(0o644)
    home.chmod(0o755)
    report = run_nereus("--json", "doctor", home=home)
    assert report.code == 1
    check = next(c for c in report.json()["checks"] if c["name"] == "permissions")
    assert not check["ok"]
    assert "nereus.toml 0644" in check["detail"]
    assert f"{home} 0755" in check["detail"]
    assert check["fix"].startswith(f"chmod -R go-rwx {home}")
    assert check["severity"] == "error"  # nereus.toml can hold object-store secrets
    (home / "nereus.toml").chmod(0o600)
    warned = run_nereus("--json", "doctor", home=home)
    check = next(c for c in warned.json()["checks"] if c["name"] == "permissions")
    assert not check["ok"] and check["severity"] == "warning"  # reported, not fatal
    assert warned.code == 0
