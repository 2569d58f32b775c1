"""Playbooks robust to their input, run as an operator would (the installed ``nereus`` in a
subprocess, a fresh home, ``--json``): a condition nested too deep is a clean usage error,
and values that look like options (``--home=...``, ``--json``) reach the child commands as
values, against the run's own home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_nereus

HOSTILE = '''
description = "Values that look like options stay values."

[vars.key]
description = "a message key"

[vars.checkpoint]
description = "a checkpoint id"

[[steps]]
id = "schedule"
title = "Schedule a message with the key"
run = ["message", "schedule", "--lane", "local", "--delay", "1h", "--payload", "x",
       "--key", "{key}"]
post = ["output.shard == 'default/0'"]

[[steps]]
id = "verify"
title = "Verify the named checkpoint (there is none)"
run = ["checkpoint", "verify", "{checkpoint}"]
exit_codes = [3]
post = ["output.exit_code == 3"]
'''


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    assert run_nereus("init", home=path).code == 0
    return path


def test_a_condition_nested_too_deep_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    """A playbook file with a condition nested 150 deep: exit 2, one JSON error naming the
    file, line, step, field and limit; no traceback; list marks it unusable."""
    path = tmp_path / "deep.toml"
    path.write_text('description = "Too deep."\n\n[[steps]]\nid = "look"\ntitle = "Look"\n'
                    'run = ["lane", "list"]\n'
                    f'post = ["{"(" * 150}true{")" * 150}"]\n')
    result = run_nereus("--json", "playbook", "run", str(path), "--yes", home=home)
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr) < 2000
    error = result.json()
    assert error["ok"] is False and error["exit_code"] == 2
    assert error["error"].startswith(f"{path}:7: step 'look': post: expression nested 150 "
                                     "deep, the limit is 32")
    (home / "playbooks").mkdir(exist_ok=True)
    (home / "playbooks" / "deep.toml").write_text(path.read_text())
    listed = run_nereus("--json", "playbook", "list", home=home)
    assert listed.code == 0, listed.stderr
    row = next(r for r in listed.json() if r["name"] == "deep")
    assert "nested 150 deep, the limit is 32" in row["error"]


@pytest.mark.timeout(120)
def test_values_that_look_like_options_stay_values(home: Path, tmp_path: Path) -> None:
    """--var key=--json is the message's key (not the global --json), and
    --var checkpoint=--home=ELSEWHERE is the checkpoint looked for in the run's own home:
    ELSEWHERE is never used or created."""
    elsewhere = tmp_path / "elsewhere"
    path = tmp_path / "hostile.toml"
    path.write_text(HOSTILE)
    result = run_nereus("--json", "playbook", "run", str(path), "--var", "key=--json",
                        "--var", f"checkpoint=--home={elsewhere}", "--yes", home=home)
    assert "Traceback" not in result.stderr
    assert result.code == 0, result.stdout + result.stderr
    report = result.json()
    schedule, verify = report["steps"]
    assert schedule["args"] == ["message", "schedule", "--lane=local", "--delay=1h",
                                "--payload=x", "--key=--json"]
    assert schedule["exit_code"] == 0 and schedule["output"]["kind"] == "SCHEDULE"
    assert verify["args"] == ["checkpoint", "verify", "--", f"--home={elsewhere}"]
    assert verify["output"]["error"].startswith(f"no checkpoint --home={elsewhere} in the "
                                                f"catalog of file://{home}")
    log = run_nereus("--json", "shard", "log", "default/0", home=home)
    assert log.code == 0, log.stderr
    records = [json.loads(line) for line in log.stdout.splitlines()]
    assert [r["kind"] for r in records] == ["ROUTE_IDENTITY", "SCHEDULE"]
    assert "key=--json " in records[1]["summary"]
    assert not elsewhere.exists()
