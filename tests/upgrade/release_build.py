"""A released build of Nereus Delay, made from this repository's own history.

``docs/releases.toml`` names each release's commit. ``build_release`` exports that commit's
tree (``git archive``) and gives it a virtual environment of its own: no download and no
install step, because the release's dependencies are the ones this checkout's ``.venv``
holds (its ``site-packages`` is on the new environment's path through a ``.pth`` file, as a
plain directory, so this checkout's own editable ``nereus`` is not). The release's
``nereus`` console script is written as its wheel would write it, and the daemon it starts
runs under the same interpreter, so every process of the old home runs the old code.
Building takes well under a second; a test module builds once (``old_release`` fixture).
"""

from __future__ import annotations

import io
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RELEASES = REPO / "docs" / "releases.toml"
# generated at install time (scripts/gen-oxia-proto), so not in the commit: copied over
GENERATED = ("adapters/backends/coordination/oxia_proto",)


@dataclass(frozen=True, slots=True)
class Release:
    version: str
    commit: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class ReleaseBuild:
    release: Release
    tree: Path  # the release's source tree
    python: Path  # its environment's interpreter
    nereus: Path  # its console script

    def environ(self) -> dict[str, str]:
        """What its processes' environment must say: a ``PYTHONPATH`` of the caller's
        (another checkout's) would put that code before the release's in every process,
        the daemon it starts too; its own tree instead."""
        return {"PYTHONPATH": str(self.tree)}


def releases() -> list[Release]:
    """Every release ``docs/releases.toml`` records, oldest first."""
    data = tomllib.loads(RELEASES.read_text())
    return [Release(r["version"], r["commit"], r["feature_level"]) for r in data["release"]]


def release(version: str) -> Release:
    found = [r for r in releases() if r.version == version]
    assert found, f"{RELEASES} records no release {version}"
    return found[0]


def _export(commit: str, tree: Path) -> None:
    """The commit's files into ``tree`` (symlinks kept: nereus/engine -> ../engine)."""
    done = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit],
                          capture_output=True, check=False, timeout=60)
    assert done.returncode == 0, (
        f"git archive {commit} failed: {done.stderr.decode()} (a shallow clone lacks the "
        "release's commit: `git fetch --unshallow`)")
    tree.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        tar.extractall(tree, filter="tar")
    for generated in GENERATED:
        source = REPO / generated
        (tree / generated).mkdir(parents=True, exist_ok=True)
        for item in source.glob("*.py*"):
            (tree / generated / item.name).write_bytes(item.read_bytes())


def build_release(found: Release, into: Path) -> ReleaseBuild:
    """The release's tree and environment under ``into`` (see the module's docstring)."""
    tree, venv = into / "tree", into / "venv"
    _export(found.commit, tree)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)
    site = Path(sysconfig.get_paths()["purelib"])  # this checkout's .venv
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (venv / "lib" / version / "site-packages" / "nereus_release.pth").write_text(
        f"{tree}\n{site}\n")
    python = venv / "bin" / "python"
    nereus = venv / "bin" / "nereus"
    nereus.write_text(f"#!{python}\nimport sys\nfrom nereus.cli.entry import main\n"
                      "sys.exit(main())\n")
    nereus.chmod(0o755)
    return ReleaseBuild(found, tree, python, nereus)
