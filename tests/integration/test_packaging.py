"""Packaging: sdist -> wheel carries the linked folders as real modules of one namespace."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HATCHLING = str(Path(sys.executable).parent / "hatchling")


def _build(kind: str, source: Path, out: Path) -> Path:
    subprocess.run([HATCHLING, "build", "-t", kind, "-d", str(out)], cwd=source, check=True,
                   capture_output=True)
    (built,) = out.iterdir()
    return built


def test_sdist_to_wheel_installs_one_importable_namespace(tmp_path: Path) -> None:
    """A wheel built from the sdist holds nereus.engine/cli/tui as files and imports them."""
    sdist = _build("sdist", ROOT, tmp_path / "sdist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "src", filter="data")
    (source,) = (tmp_path / "src").iterdir()
    assert not (source / "nereus" / "engine").is_symlink(), "the sdist must dereference links"
    wheel = _build("wheel", source, tmp_path / "wheel")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("nereus/engine/runner.py", "nereus/engine/shardlog/file.py",
                     "nereus/cli/main.py", "nereus/tui/__init__.py",
                     "nereus/_data/playbooks/README.md"):
        assert required in names, required
    assert not any(name.startswith(("engine/", "cli/", "tui/")) for name in names)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(target), str(wheel)], check=True)
    probe = ("import nereus.engine.runner, nereus.cli.main, nereus.tui, nereus\n"
             "print(nereus.engine.runner.__file__)")
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert out.stdout.strip().startswith(str(target))
