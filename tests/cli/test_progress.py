"""Long operations show a progress bar on a terminal's stderr, and nothing extra for a
program (``--json``) or a pipe."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

from tests.cli.engine_homes import init_home
from tests.conftest import NEREUS


def _batch(path: Path, lines: int) -> Path:
    path.write_text("".join(json.dumps({"lane": "local", "delay": "1h", "id": f"p-{n}",
                                        "payload": "x"}) + "\n" for n in range(lines)))
    return path


def _run(home: Path, *args: str, stderr_tty: bool) -> tuple[int, str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    environ.update({"NEREUS_WORKERS": "1", "COLUMNS": "120", "TERM": "xterm"})
    if not stderr_tty:
        done = subprocess.run([NEREUS, "--home", str(home), *args], capture_output=True,
                              text=True, env=environ, timeout=120, check=False)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([NEREUS, "--home", str(home), *args], stdout=subprocess.PIPE,
                                stderr=follower, text=True, env=environ)
        os.close(follower)
        chunks: list[bytes] = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        out = proc.stdout.read() if proc.stdout else ""
        code = proc.wait(120)
    finally:
        os.close(leader)
    return code, out, b"".join(chunks).decode(errors="replace")


def test_a_batch_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    """--batch of 20,000 lines: on a terminal, stderr draws the checking and queueing bars;
    through a pipe and under --json, stderr stays empty and stdout is the document."""
    home = init_home(tmp_path / "home")
    code, _, err = _run(home, "message", "schedule", "--batch",
                        str(_batch(tmp_path / "a.jsonl", 20_000)), stderr_tty=True)
    assert code == 0, err
    assert "queueing a.jsonl" in err or "checking a.jsonl" in err, err[-500:]
    code, out, err = _run(home, "--json", "message", "schedule", "--batch",
                          str(_batch(tmp_path / "b.jsonl", 2_000)), stderr_tty=False)
    assert code == 0 and err == "", err
    assert json.loads(out)["queued"] == 2_000
