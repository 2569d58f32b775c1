"""nereus.toml has one typed schema: wrong keys, types and ranges are errors that say where.

Every bad value exits 2 (ConfigError) naming ``nereus.toml:LINE``, the table and key, and
what was expected; a misspelt key gets "did you mean". Never a crash at start, never a
truthy string taken for a boolean.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nereus.config import parse_config
from nereus.errors import ConfigError, ExitCode
from tests.conftest import run_nereus

BASE = '[routes.default]\nlog = "file"\npartitions = 2\n\n'


@pytest.mark.parametrize(("table", "line", "expected", "hint"), [
    ('[engine]\nchrony = "false"', 6, "[engine] chrony = 'false': expected true or false",
     "write chrony = false (no quotes)"),
    ('[checkpoints]\nprune_log = "false"', 6, "[checkpoints] prune_log = 'false': expected "
     "true or false", "no quotes"),
    ('[engine]\nmax_in_flight = "lots"', 6, "[engine] max_in_flight = 'lots': expected an "
     "integer", None),
    ("[engine]\nmax_in_flight = 0", 6, "[engine] max_in_flight = 0: expected an integer >= 1",
     None),
    ("[engine]\nquantum = 0", 6, "[engine] quantum = 0: expected an integer >= 1", None),
    ("[engine]\npoll_interval_ms = 0", 6, "[engine] poll_interval_ms = 0: expected a number "
     ">= 1", None),
    ("[engine]\n\nmax_in_fligth = 10", 7, "[engine] unknown key 'max_in_fligth'",
     "did you mean 'max_in_flight'?"),
    ("[checkpoints]\nmax_share = 0", 6, "[checkpoints] max_share = 0: expected a number > 0",
     None),
    ("[checkpoints]\nmax_share = 1.5", 6, "[checkpoints] max_share = 1.5: expected a number "
     "<= 1", None),
    ("[checkpoint]\nkeep = 2", 5, "unknown table [checkpoint]", "did you mean 'checkpoints'?"),
    ('[lanes.out]\ndestination = "kafak"', 6, "[lanes.out] destination = 'kafak': expected one "
     "of file, kafka, pulsar", "did you mean 'kafka'?"),
    ("[lanes.out]\npath = \"x\"", 5, "[lanes.out] needs destination", None),
    ('[lanes.out]\ndestination = "file"\npath = "x"\nordered = "yes"', 8,
     "[lanes.out] ordered = 'yes': expected true or false", None),
    ("[shard]\nmax_headers = 0", 6, "[shard] max_headers = 0: expected an integer >= 1", None),
    ("[shard]\nmax_clock_ahead_ms = true", 6, "[shard] max_clock_ahead_ms = True: expected an "
     "integer", None),
    ('[lanes.out]\ndestination = "kafka"\nhandoff = "deliver_at"', 7, "[lanes.out] handoff",
     None),
    ('[lanes.out]\ndestination = "kafka"\nretention = "a while"', 7,
     "[lanes.out] retention", None),
    ('[lanes.out]\ndestination = "kafka"\ndedup_window = 7', 7,
     "[lanes.out] dedup_window = 7: expected a string", None),
    ('[engine]\npayload_gc_interval = "hourly"', 6, "[engine] payload_gc_interval", None),
    ("[engine]\npayload_gc_interval = 60", 6,
     "[engine] payload_gc_interval = 60: expected a string", None),
])
def test_bad_values_name_file_line_key_and_expectation(
        table: str, line: int, expected: str, hint: str | None) -> None:
    """Each bad setting: ConfigError (exit 2) at nereus.toml:LINE saying what was expected."""
    with pytest.raises(ConfigError) as info:
        parse_config(BASE + table, source="nereus.toml")
    error = info.value
    assert error.exit_code == ExitCode.USAGE
    assert error.message.startswith(f"nereus.toml:{line}: "), error.message
    assert expected in error.message, error.message
    if hint is not None:
        assert error.hint is not None and hint in error.hint, error.hint


def test_the_partition_count_of_a_route_is_bounded() -> None:
    """A route's partition count outside its bounds is a configuration error naming the field."""
    with pytest.raises(ConfigError) as info:
        parse_config("[routes.default]\npartitions = 5000\n")
    assert "partitions = 5000: expected an integer <= 4096" in info.value.message


def test_typed_values_reach_their_readers() -> None:
    """The engine, factories and CLI read typed values: numbers are numbers, booleans are
    booleans, defaults fill the rest."""
    config = parse_config(BASE + "[engine]\nchrony = true\nmax_in_flight = 7\n"
                          "poll_interval_ms = 2.5\n\n[checkpoints]\nprune_log = true\n\n"
                          '[lanes.out]\ndestination = "pulsar"\nhandoff = "deliver_at"\n'
                          "lead_ms = 1500\nordered = true\n")
    assert config.engine.chrony is True and config.engine.max_in_flight == 7
    assert config.engine.poll_interval_ms == 2.5 and config.engine.quantum == 256
    assert config.checkpoints.prune_log is True and config.checkpoints.max_share == 0.05
    lane = config.lanes["out"]
    assert (lane.name, lane.handoff_lead_ms, lane.ordered) == ("out", 1500, True)
    week = 7 * 86_400_000
    assert (lane.retention_ms, lane.dedup_window_ms) == (week, week)  # the defaults
    assert config.engine.payload_gc_interval_s == 3_600.0
    assert config.routes["default"].dedup_window_ms == week
    assert config.routes["default"].partitions == 2 and config.routes["default"].name == \
        "default"


def test_a_bad_setting_stops_the_cli_with_a_json_error_not_a_crash(tmp_path: Path) -> None:
    """`engine start` and `doctor` on a home whose nereus.toml says chrony = "false": exit 2
    and 1 with the file, line and fix; no traceback."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    config = home / "nereus.toml"
    config.write_text(config.read_text() + '\n[engine]\nchrony = "false"\n')
    line = len(config.read_text().splitlines())
    started = run_nereus("--json", "engine", "start", home=home, timeout=60)
    assert started.code == 2 and "Traceback" not in started.stderr
    document = json.loads(started.stdout)
    assert document["error"].startswith(f"{config}:{line}: [engine] chrony = 'false'")
    assert "chrony = false (no quotes)" in document["hint"]
    doctor = run_nereus("--json", "doctor", home=home, timeout=60)
    assert doctor.code == 1
    (check,) = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "config"]
    assert not check["ok"] and f"nereus.toml:{line}" in check["detail"]


def test_a_routes_dedup_window_is_a_duration() -> None:
    """``[routes.NAME] dedup_window`` that is not a duration is refused naming the route's
    table and key; "0s" is allowed (results kept for ever)."""
    with pytest.raises(ConfigError) as info:
        parse_config('[routes.default]\nlog = "file"\ndedup_window = "a week"\n')
    assert "nereus.toml:3: [routes.default] dedup_window" in info.value.message, \
        info.value.message
    config = parse_config('[routes.default]\nlog = "file"\ndedup_window = "0s"\n')
    assert config.routes["default"].dedup_window_ms == 0
