"""The README's "Using it" block works as written, in a shell that has only what
``make quickstart`` left behind (``.venv``), not a PATH a developer prepared."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INTERACTIVE = ("nereus dashboard", "tail -f", "man ", "eval ")


def _using_it() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "the README's Using it section has no sh block"
    return [line for line in block.group(1).splitlines()
            if line.strip() and not line.startswith(INTERACTIVE)]


def test_the_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """Each command of the block, run in order by bash -e from a directory holding the
    checkout's .venv, exits 0; `message show` answers for the message it scheduled, and the
    replay it builds offline is there."""
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    lines = _using_it()
    assert lines[0].startswith(". .venv/bin/activate"), lines[0]
    script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("NEREUS_", "VIRTUAL_ENV"))}
    environ["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # no venv on it: the README puts it there
    environ["NEREUS_WORKERS"] = "1"
    replayed = Path("/tmp/replayed")
    subprocess.run(["rm", "-rf", str(replayed)], check=True)
    try:
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=environ,
                              capture_output=True, text=True, timeout=240, check=False)
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        # `message show order-17` answered (the message is due 5 s after it was applied;
        # whether the engine published it before the block stops it is a race)
        assert "order-17" in done.stdout
        assert "SCHEDULED" in done.stdout or "PUBLISHED" in done.stdout
        assert (replayed / "CURRENT").exists()
    finally:
        subprocess.run(["bash", "-c", ". .venv/bin/activate; "
                        "NEREUS_HOME=$PWD/.nereus nereus engine stop"], cwd=tmp_path,
                       env=environ, capture_output=True, timeout=120, check=False)
        subprocess.run(["rm", "-rf", str(replayed)], check=True)
