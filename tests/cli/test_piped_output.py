"""Human output through a pipe is not cut to 80 columns (Rich's guess without a
terminal): tables keep whole values on one line, so grep and awk see them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import NEREUS, run_nereus


def test_a_table_piped_keeps_long_values_whole(tmp_path: Path) -> None:
    """`nereus status` piped, without COLUMNS: a 64-character lane name and its counts
    stay on one line of the table."""
    home = tmp_path / "h"
    assert run_nereus("init", home=home).code == 0
    lane = "lane-" + "x" * 59
    config = home / "nereus.toml"
    config.write_text(config.read_text() + f'\n[lanes.{lane}]\ndestination = "file"\n'
                      f'path = "outbox/long.jsonl"\n')
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("NEREUS_") and k != "COLUMNS"}
    environ["NO_COLOR"] = "1"
    done = subprocess.run([NEREUS, "--home", str(home), "status"], capture_output=True,
                          text=True, env=environ, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if lane in line]
    assert len(rows) == 1, done.stdout
    assert "none" in rows[0]  # the row's last column, on the same line
