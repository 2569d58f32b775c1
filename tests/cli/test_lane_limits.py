"""A lane's limits on new work, run as an operator would: ``max_delay`` and
``max_pending`` in ``[lanes.NAME]``, replicated by the engine (LANE_LIMITS, in the Shard
Log) and enforced by apply: a schedule too far ahead is REJECTED ``MAX_DELAY_EXCEEDED``
and one into a full lane ``LANE_FULL``, each naming the limit; a bad ``max_delay`` is
refused when the file is read, naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.engine_homes import one_json
from tests.conftest import run_nereus
from tests.daemon import running_engine


def _schedule(home: Path, message_id: str, delay: str) -> dict[str, Any]:
    result = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", delay,
                        "--id", message_id, "--wait", home=home)
    assert result.code in (0, 1), result.stderr  # 1: the answer is REJECTED
    receipt: dict[str, Any] = one_json(result)
    assert receipt["evidence"] == "APPLIED", receipt
    return receipt


def _limited_home(path: Path, lines: str) -> Path:
    assert run_nereus("init", home=path).code == 0
    config = path / "nereus.toml"
    text = config.read_text()
    anchor = 'destination = "file"\n'
    assert anchor in text
    config.write_text(text.replace(anchor, anchor + lines, 1))
    return path


def test_max_delay_and_max_pending_refuse_new_work_naming_the_limit(tmp_path: Path) -> None:
    """max_delay 1h, max_pending 2: a 2h delay is REJECTED MAX_DELAY_EXCEEDED, two 30m
    schedules apply, the third is REJECTED LANE_FULL; the Shard Log holds the engine's
    LANE_LIMITS record."""
    home = _limited_home(tmp_path / "home", 'max_delay = "1h"\nmax_pending = 2\n')
    with running_engine(home):
        far = _schedule(home, "far", "2h")
        assert (far["result"], far["reason"]) == ("REJECTED", "MAX_DELAY_EXCEEDED")
        assert "max_delay = 1h" in far["detail"] and far["delay_message_id"] == "far"
        assert [_schedule(home, m, "30m")["result"] for m in ("a", "b")] == ["APPLIED"] * 2
        full = _schedule(home, "c", "30m")
        assert (full["result"], full["reason"]) == ("REJECTED", "LANE_FULL")
        assert "max_pending is 2" in full["detail"]
    log = run_nereus("--json", "shard", "log", "default/0", home=home)
    assert log.code == 0, log.stderr
    kinds = [json.loads(line)["kind"] for line in log.stdout.splitlines()]
    assert "LANE_LIMITS" in kinds[:kinds.index("SCHEDULE")], kinds


def test_the_default_max_delay_is_400_days(tmp_path: Path) -> None:
    """Without max_delay in the table: 399 days apply, 401 days are REJECTED."""
    home = _limited_home(tmp_path / "home", "")
    with running_engine(home):
        assert _schedule(home, "near", "399d")["result"] == "APPLIED"
        far = _schedule(home, "far", "401d")
        assert (far["result"], far["reason"]) == ("REJECTED", "MAX_DELAY_EXCEEDED")
        assert "max_delay = 400d" in far["detail"]


def test_a_bad_max_delay_is_refused_naming_the_key(tmp_path: Path) -> None:
    """``max_delay = "soon"``: the engine refuses the file, naming lanes.local.max_delay
    and its line (exit 2)."""
    home = _limited_home(tmp_path / "home", 'max_delay = "soon"\n')
    result = run_nereus("--json", "engine", "start", home=home)
    assert result.code == 2, result.stdout
    error = result.json()["error"]
    assert "max_delay" in error and "'soon' is not a duration" in error
