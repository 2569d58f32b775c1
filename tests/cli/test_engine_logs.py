"""``nereus engine logs``: the engine's JSON log read back, filtered and rendered, as an
operator runs it (installed ``nereus``, a home's ``log`` directory)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.cli.engine_homes import init_home
from tests.conftest import NEREUS, run_nereus
from tests.polling import wait_until


def _line(ts: str, level: str, event: str, **fields: object) -> str:
    return json.dumps({**fields, "event": event, "level": level,
                       "timestamp": f"2026-12-01T10:00:{ts}Z"}) + "\n"


def _written_logs(home: Path) -> None:
    """The daemon's log and a worker's, as the engine writes them, plus one torn line."""
    log = home / "log"
    log.mkdir()
    (log / "engine.log").write_text(
        _line("01.000000", "info", "engine_started", shards=2)
        + _line("04.000000", "warning", "lane_not_ready", lane="local", reason="\x1b[2Jboom")
        + '{"event": "torn\n')
    (log / "worker-0.log").write_text(
        _line("02.000000", "info", "attempt_admitted", shard="default/1",
              delay_message_id="m1", attempt_id="a1")
        + _line("03.000000", "error", "attempt_unknown", shard="default/1", attempt_id="a1")
        + _line("05.000000", "info", "attempt_admitted", shard="default/0",
                delay_message_id="m2", attempt_id="a2"))


def _events(*args: str, home: Path) -> list[str]:
    result = run_nereus("--json", "engine", "logs", *args, home=home)
    assert result.code == 0, result.stderr
    lines: list[dict[str, Any]] = result.json()["lines"]
    return [str(line["event"]) for line in lines]


def test_logs_merge_the_files_and_filter(tmp_path: Path) -> None:
    """Both files are read, merged by timestamp; a torn line is kept as text (and passes
    any --level); --level,
    --shard, --since and --message each keep what they name (a message's story includes
    the lines of its attempt that do not name the message)."""
    home = init_home(tmp_path / "home")
    _written_logs(home)
    result = run_nereus("--json", "engine", "logs", home=home)
    assert result.code == 0, result.stderr
    document = result.json()
    assert [Path(f).name for f in document["files"]] == ["engine.log", "worker-0.log"]
    events = [line["event"] for line in document["lines"]]
    assert events == ['{"event": "torn', "engine_started", "attempt_admitted",
                      "attempt_unknown", "lane_not_ready", "attempt_admitted"]
    assert document["lines"][0]["level"] == "unparsed"
    # a line that is not JSON has no level to judge: it passes any --level (it may be a crash)
    assert _events("--level", "warning", home=home) == \
        ['{"event": "torn', "attempt_unknown", "lane_not_ready"]
    assert _events("--shard", "default/0", home=home) == ["attempt_admitted"]
    assert _events("--since", "2026-12-01T10:00:04Z", home=home) == \
        ["lane_not_ready", "attempt_admitted"]
    assert _events("--message", "m1", home=home) == ["attempt_admitted", "attempt_unknown"]


def test_logs_are_rendered_safely_and_bad_filters_refused(tmp_path: Path) -> None:
    """The human rendering names each event and escapes control characters; an unknown
    level is a usage error (exit 2), a home without logs exit 3."""
    home = init_home(tmp_path / "home")
    assert run_nereus("engine", "logs", home=home).code == 3
    _written_logs(home)
    shown = run_nereus("engine", "logs", home=home)
    assert shown.code == 0, shown.stderr
    assert "engine_started" in shown.stdout and "lane_not_ready" in shown.stdout
    assert "\x1b" not in shown.stdout and "\\x1b[2Jboom" in shown.stdout
    refused = run_nereus("engine", "logs", "--level", "loud", home=home)
    assert refused.code == 2 and "--level" in refused.stderr


def test_follow_prints_lines_as_the_engine_writes_them(engine_home: Path) -> None:
    """-f --json prints the engine's lines as JSON objects, one per line, and keeps
    printing what is written after it started (here, a line appended to engine.log)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    follower = subprocess.Popen([NEREUS, "--home", str(engine_home), "--json", "engine",
                                 "logs", "-f"], stdout=subprocess.PIPE, text=True, env=environ)
    try:
        assert follower.stdout is not None
        # the follower notes where each file ends before it prints the lines already
        # there: once the first one is printed, anything appended is new to it
        first = json.loads(follower.stdout.readline())
        assert "event" in first
        with open(engine_home / "log" / "engine.log", "a") as log:
            log.write(_line("59.000000", "info", "written_after_follow_started"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = json.loads(follower.stdout.readline())
            if line["event"] == "written_after_follow_started":
                break
        else:
            raise AssertionError("the follower never printed the new line")
    finally:
        follower.terminate()
        follower.wait(30)


def test_a_messages_story_at_debug_level(tmp_path: Path) -> None:
    """With [engine] log_level = "debug", `engine logs --message ID` tells a published
    message's story from the engine's own lines: admitted, then its outcome, each line
    carrying the message id and the same attempt id."""
    from tests.daemon import running_engine

    home = init_home(tmp_path / "home")
    config = home / "nereus.toml"
    config.write_text(config.read_text() + '\n[engine]\nlog_level = "debug"\n')
    with running_engine(home):
        queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay",
                            "0s", "--id", "story-1", "--payload", "x", "--wait", home=home)
        assert queued.code == 0, queued.stderr

        def told() -> list[dict[str, Any]] | None:
            result = run_nereus("--json", "engine", "logs", "--message", "story-1", home=home)
            lines: list[dict[str, Any]] = result.json()["lines"]
            return lines if any(line["event"] == "message_outcome" for line in lines) else None

        story = wait_until("the message's outcome in the log", told, 30)
    assert [line["event"] for line in story] == ["message_admitted", "message_outcome"]
    assert {line["delay_message_id"] for line in story} == {"story-1"}
    assert len({line["attempt_id"] for line in story}) == 1
    assert story[1]["outcome"] == "PUBLISHED"


def test_a_message_without_log_lines_says_why(tmp_path: Path) -> None:
    """At the default log level a message that published without trouble has no line in the
    engine's log: `engine logs --message ID` says so and why (log_level; set it to debug),
    and points at `message show`, instead of printing nothing."""
    from tests.daemon import running_engine

    home = init_home(tmp_path / "home")
    with running_engine(home):
        queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay",
                            "0s", "--id", "quiet-1", "--payload", "x", "--wait", home=home)
        assert queued.code == 0, queued.stderr
        wait_until("quiet-1 to be published",
                   lambda: run_nereus("--json", "message", "show", "quiet-1", home=home)
                 .json()["state"] == "PUBLISHED", 30)
    result = run_nereus("--json", "engine", "logs", "--message", "quiet-1", home=home)
    assert result.code == 0, result.stderr
    document = result.json()
    assert document["lines"] == []
    note = document["note"]
    assert note.startswith("no line of the engine's log names message 'quiet-1'"), note
    assert '[engine] log_level = "debug"' in note and "nereus message show quiet-1" in note
    human = run_nereus("engine", "logs", "--message", "quiet-1", home=home)
    assert human.code == 0 and human.stdout == ""
    assert "no line of the engine's log names message 'quiet-1'" in human.stderr
    assert run_nereus("--json", "engine", "logs", home=home).json()["note"] is None


def test_a_messages_story_includes_its_attempt_lines_written_first(tmp_path: Path) -> None:
    """A line about one of the message's attempts is part of its story even when it was
    written before the line that names the message (a worker's clock a moment ahead)."""
    home = init_home(tmp_path / "home")
    log = home / "log"
    log.mkdir()
    (log / "engine.log").write_text(
        _line("01.000000", "info", "attempt_sent", attempt_id="a7")
        + _line("02.000000", "info", "message_declined", delay_message_id="m7",
                attempt_id="a7")
        + _line("03.000000", "info", "attempt_sent", attempt_id="other"))
    assert _events("--message", "m7", home=home) == ["attempt_sent", "message_declined"]
