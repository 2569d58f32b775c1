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
    """A wheel built from the sdist holds nereus.engine/adapters/cli/tui as files and imports
    them."""
    sdist = _build("sdist", ROOT, tmp_path / "sdist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "src", filter="data")
    (source,) = (tmp_path / "src").iterdir()
    for linked in ("engine", "adapters", "cli", "tui"):
        assert not (source / "nereus" / linked).is_symlink(), "the sdist must dereference links"
    wheel = _build("wheel", source, tmp_path / "wheel")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("nereus/engine/shard/owner_loop.py", "nereus/adapters/offline/shard_runner.py",
                     "nereus/adapters/backends/shardlog/file_log.py",
                     "nereus/cli/main.py", "nereus/tui/__init__.py",
                     "nereus/_data/playbooks/README.md", "nereus/cli/help/nereus.txt"):
        assert required in names, required
    assert not any(name.startswith(("engine/", "adapters/", "cli/", "tui/")) for name in names)
    _assert_ships_reference(names, source)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(target), str(wheel)], check=True)
    probe = ("import nereus.adapters.offline.shard_runner, nereus.engine.shard.owner_loop, "
             "nereus.cli.main, nereus.tui, nereus\n"
             "print(nereus.adapters.offline.shard_runner.__file__)")
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert out.stdout.strip().startswith(str(target))


def _assert_ships_reference(names: set[str], source: Path) -> None:
    """Man pages and completions go where man and the shells look under the prefix."""
    data = {name.split(".data/data/", 1)[1] for name in names if ".data/data/" in name}
    pages = {f"share/man/man1/{p.name}" for p in (ROOT / "man").glob("nereus*.1")}
    assert "share/man/man1/nereus.1" in pages and pages <= data, sorted(pages - data)
    for installed in ("share/bash-completion/completions/nereus",
                      "share/zsh/site-functions/_nereus",
                      "share/fish/vendor_completions.d/nereus.fish"):
        assert installed in data, installed
    assert not any(path.endswith("README.md") for path in data), sorted(data)
    assert (source / "completions" / "_nereus").read_text().startswith("#compdef nereus")
