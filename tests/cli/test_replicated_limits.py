"""The ``[shard]`` limits are replicated through the log (SHARD_LIMITS), run as an operator
would: a replay under another ``nereus.toml`` decides exactly as the live shard did."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.engine_homes import one_json
from tests.conftest import run_nereus
from tests.daemon import running_engine

ROUTE = "partitions = 1\n"


def test_a_replay_under_another_configuration_matches_the_live_digest(tmp_path: Path) -> None:
    """The engine runs with ``[shard] max_headers = 100`` and applies a message with 70
    headers (more than the default 64); its log carries the engine's SHARD_LIMITS. With
    the ``[shard]`` table then removed from nereus.toml, ``shard replay --empty --compare
    live`` still matches (before, the replay applied the defaults and REJECTED it)."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    original = (home / "nereus.toml").read_text()
    assert ROUTE in original
    assert "\n[shard]\n" in original
    configured = original.replace("\n[shard]\n", "\n[shard]\nmax_headers = 100\n")
    (home / "nereus.toml").write_text(configured)
    headers = [arg for n in range(70) for arg in ("--header", f"h{n}=v")]
    with running_engine(home):
        scheduled = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay",
                               "1h", "--id", "wide", *headers, "--wait", home=home)
        assert scheduled.code == 0, scheduled.stdout + scheduled.stderr
        assert one_json(scheduled)["result"] == "APPLIED"
    log = run_nereus("--json", "shard", "log", "default/0", home=home)
    kinds = [json.loads(line)["kind"] for line in log.stdout.splitlines()]
    assert "SHARD_LIMITS" in kinds, kinds
    assert kinds.index("SHARD_LIMITS") < kinds.index("SCHEDULE")
    (home / "nereus.toml").write_text(original)
    replay = run_nereus("--json", "shard", "replay", "default/0", "--empty", "--compare",
                        "live", home=home, timeout=120)
    assert replay.code == 0, replay.stdout + replay.stderr
    assert json.loads(replay.stdout)["match"] is True, replay.stdout
