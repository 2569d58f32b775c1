"""docs/client.md as written: every ``python`` block runs, in order, in its own Python
process against a home made by ``nereus init`` (plus the ORDERED lane ``orders`` the page
names) with its engine running, and exits 0."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_nereus
from tests.daemon import running_engine

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text())


def test_every_example_of_the_client_page_runs_as_written(tmp_path: Path) -> None:
    """Each example exits 0 and prints what it says (the first, ten-line one included)."""
    home = tmp_path / ".nereus"
    assert run_nereus("init", home=home).code == 0
    with (home / "nereus.toml").open("a") as config:
        config.write('\n[lanes.orders]\ndestination = "file"\npath = "outbox/orders.jsonl"\n'
                     "ordered = true\n")
    examples = blocks()
    assert len(examples) >= 8
    assert len(examples[0].strip().splitlines()) <= 10, "the first schedule is ten lines"
    with running_engine(home):
        for number, code in enumerate(examples, start=1):
            done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, timeout=120,
                                  check=False,
                                  capture_output=True, text=True)
            assert done.returncode == 0, f"example {number} of {DOC.name}:\n{code}\n" \
                f"{done.stdout}{done.stderr}"
            print(f"--- example {number}\n{done.stdout}")
