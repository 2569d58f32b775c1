"""Output safe for terminals: escape sequences and Rich markup in data are shown escaped
in human output, never interpreted; ``--json`` carries them unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from nereus.client import RouteRef, prepare_schedule
from nereus.shard import ShardId
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.homelog import home_log

HOSTILE = "\x1b]0;owned\x07\x1b[2J[bold red]alarm[/bold red]\u202e"


def _hostile_schedule(home: Path) -> ShardId:
    """A client that bypasses the CLI appends a SCHEDULE whose id is an escape sequence."""
    route = RouteRef("default", 2)
    prepared = prepare_schedule(route, command_id="hostile-1", delay_message_id=HOSTILE,
                                lane="local", deliver_at_ms=1_000, key=HOSTILE,
                                headers={"h": HOSTILE})
    home_log(home, prepared.shard).append([prepared.data])
    return prepared.shard


def _assert_inert(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b]0;owned\\x07" in text  # shown, escaped
    assert "\\u202e" in text


def test_shard_log_shows_escape_sequences_escaped(home: Path) -> None:
    """shard log shows a hostile record's escape sequences escaped; --json carries them as they
    are."""
    shard = _hostile_schedule(home)
    human = run_nereus("shard", "log", str(shard), home=home)
    assert human.code == 0, human.stderr
    _assert_inert(human.stdout)
    lines = run_nereus("--json", "shard", "log", str(shard), home=home)
    ids = [json.loads(line)["ids"].get("delay_message_id") for line in lines.stdout.splitlines()]
    assert HOSTILE in ids  # JSON Lines carry it unchanged


def test_an_operators_reason_is_data_not_markup(home: Path) -> None:
    """A reason holding escape sequences and Rich markup is printed escaped and literal, and
    stored unchanged."""
    human = run_nereus("lane", "close", "local", "--reason", HOSTILE, "--yes", home=home)
    assert human.code == 0, human.stderr
    _assert_inert(human.stdout)
    assert "[bold red]alarm[/bold red]" in human.stdout  # markup printed, not interpreted
    doc = run_nereus("--json", "lane", "open", "local", "--reason", HOSTILE, "--yes",
                     home=home).json()
    assert doc["operator_reason"] == HOSTILE  # JSON unchanged


def test_rejected_hostile_records_and_listing_stay_readable(home: Path) -> None:
    """The core refuses an id with control characters; listing, command show and status keep
    working and print nothing raw."""
    shard = _hostile_schedule(home)
    with running_engine(home):
        listed = run_nereus("--json", "message", "list", home=home)
        assert listed.code == 0, listed.stderr
        assert listed.json()["messages"] == []  # the core refused the id: nothing stored
        receipt = run_nereus("--json", "command", "show", "hostile-1", home=home).json()
        assert receipt["result"] == "REJECTED" and receipt["shard"] == str(shard)
        assert "control character" in receipt["detail"]
        human = run_nereus("command", "show", "hostile-1", home=home)
        assert "\x1b" not in human.stdout
        status = run_nereus("engine", "status", home=home)
        assert status.code == 0, status.stdout + status.stderr
