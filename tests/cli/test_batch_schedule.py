"""``message schedule --batch`` as an operator runs it: the installed ``nereus``, fresh homes,
with the engine running and without it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nereus.shard import partition_for
from tests.cli.engine_homes import (
    SHARDS,
    log_ends,
    nothing_queued,
    one_json,
    uid,
    write_batch,
)
from tests.conftest import NEREUS, run_nereus
from tests.daemon import running_engine
from tests.polling import days_ahead, wait_until


def _batch_lines(prefix: str, count: int) -> list[dict[str, Any] | str]:
    lines: list[dict[str, Any] | str] = []
    for n in range(count):
        line: dict[str, Any] = {"id": f"{prefix}-{n}", "lane": "local", "key": f"k{n}",
                                "headers": {"n": str(n)}, "payload": f"p{n}"}
        if n % 2:
            line["delay"] = "1h"
        else:
            line["deliver_at"] = days_ahead(300)
            line["expire_at"] = days_ahead(301)
        lines.append(line)
    return lines


def _check_receipts(data: dict[str, Any], prefix: str, count: int) -> None:
    assert data["queued"] == count and data["rejected"] == 0
    receipts = data["receipts"]
    assert [r["delay_message_id"] for r in receipts] == [f"{prefix}-{n}" for n in range(count)]
    assert all(r["evidence"] == "QUEUED" and r["kind"] == "SCHEDULE" for r in receipts)
    for shard in SHARDS:
        positions = [r["source_position"] for r in receipts if r["shard"] == shard]
        assert positions == sorted(set(positions)), f"positions on {shard} not increasing"
        assert positions == list(range(positions[0], positions[0] + len(positions)))
    for r in receipts:
        assert r["shard"] == f"default/{partition_for(r['delay_message_id'], 2)}"


def test_batch_schedule_with_the_engine_running(engine_home: Path, tmp_path: Path) -> None:
    """--batch of 3,000 lines through the engine: one receipt per line; all get applied."""
    prefix, count = uid("batch"), 3000
    path = write_batch(tmp_path / "batch.jsonl", _batch_lines(prefix, count))
    result = run_nereus("--json", "message", "schedule", "--batch", str(path),
                        home=engine_home)
    assert result.code == 0, result.stderr
    _check_receipts(one_json(result), prefix, count)

    def all_applied() -> bool:
        listed = run_nereus("--json", "message", "list", "--state", "scheduled", "--limit",
                            "100000", home=engine_home)
        assert listed.code == 0, listed.stderr
        ours = [m for m in listed.json()["messages"]
                if m["delay_message_id"].startswith(prefix + "-")]
        return len(ours) == count

    wait_until("the batch to be applied", all_applied, 30, interval_s=0.2)


def test_batch_schedule_without_the_engine(home: Path, tmp_path: Path) -> None:
    """--batch with no engine goes straight to the Shard Logs; an engine applies it later."""
    prefix, count = uid("offline"), 3000
    path = write_batch(tmp_path / "batch.jsonl", _batch_lines(prefix, count))
    result = run_nereus("--json", "message", "schedule", "--batch", str(path), home=home)
    assert result.code == 0, result.stderr
    _check_receipts(one_json(result), prefix, count)
    assert sum(end or 0 for end in log_ends(home).values()) == count + 2  # + the identities
    last = f"{prefix}-{count - 1}"
    with running_engine(home):
        shown = run_nereus("--json", "message", "show", last, "--barrier", home=home)
        assert shown.code == 0, shown.stderr
        assert shown.json()["state"] == "SCHEDULED"
        assert shown.json()["expire_at"] is None


BAD_LINES: list[tuple[str, dict[str, Any] | str, str]] = [
    ("not-json", "{not json", "not JSON"),
    ("not-an-object", "[1, 2]", "JSON object"),
    ("no-lane", {"id": "x", "delay": "1m"}, "lane"),
    ("bad-delay", {"id": "x", "lane": "local", "delay": "soon"}, "delay"),
    ("bad-deliver-at", {"id": "x", "lane": "local", "deliver_at": "tomorrow"}, "deliver_at"),
    ("both-times", {"id": "x", "lane": "local", "delay": "1m",
                    "deliver_at": days_ahead(300)}, "deliver_at"),
    ("bad-expire-at", {"id": "x", "lane": "local", "delay": "1m", "expire_at": "never"},
     "expire_at"),
    ("bad-headers", {"id": "x", "lane": "local", "delay": "1m", "headers": {"a": 1}},
     "headers"),
    ("bad-payload", {"id": "x", "lane": "local", "delay": "1m", "payload": 5}, "payload"),
    ("bad-key", {"id": "x", "lane": "local", "delay": "1m", "key": ["k"]}, "key"),
    ("unknown-field", {"id": "x", "lane": "local", "delay": "1m", "colour": "red"}, "colour"),
]


@pytest.mark.parametrize(("bad", "field"), [(b, f) for _, b, f in BAD_LINES],
                         ids=[name for name, _, _ in BAD_LINES])
def test_batch_with_a_bad_line_exits_2_and_queues_nothing(
    offline_home: Path, tmp_path: Path, bad: dict[str, Any] | str, field: str,
) -> None:
    """A bad line exits 2 naming its line number and field; no line of the file is queued."""
    lines = _batch_lines(uid("bad"), 200)
    lines.insert(150, bad)
    path = write_batch(tmp_path / "bad.jsonl", lines)
    result = run_nereus("--json", "message", "schedule", "--batch", str(path),
                        home=offline_home)
    assert result.code == 2, result.stderr
    error = one_json(result)["error"]
    assert error.startswith("line 151:"), error
    assert field in error, error
    assert nothing_queued(offline_home)


def test_batch_with_a_bad_line_queues_nothing_through_the_engine(
    engine_home: Path, tmp_path: Path,
) -> None:
    """With the engine running too, a bad line exits 2 before anything reaches a log."""
    lines = _batch_lines(uid("bad"), 50)
    lines.append({"id": "x", "lane": "local", "delay": "later"})
    before = log_ends(engine_home)
    result = run_nereus("--json", "message", "schedule", "--batch",
                        str(write_batch(tmp_path / "bad.jsonl", lines)), home=engine_home)
    assert result.code == 2
    error = one_json(result)["error"]
    assert "line 51" in error and "delay" in error
    assert result.stderr == ""  # --json: the error is the one document on stdout
    assert log_ends(engine_home) == before




def _stdin_lines(lines: list[dict[str, Any] | str]) -> str:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                   for line in lines)


def test_batch_from_standard_input(offline_home: Path) -> None:
    """`--batch -` reads the lines from standard input (a pipe from another tool): one
    receipt a line, numbered as the lines came; the human report names standard input."""
    prefix, count = uid("stdin"), 200
    result = run_nereus("--json", "message", "schedule", "--batch", "-", home=offline_home,
                        input_text=_stdin_lines(_batch_lines(prefix, count)))
    assert result.code == 0, result.stderr
    data = one_json(result)
    _check_receipts(data, prefix, count)
    assert [r["line"] for r in data["receipts"]] == list(range(1, count + 1))
    human = run_nereus("message", "schedule", "--batch", "-", home=offline_home,
                       input_text=_stdin_lines(_batch_lines(uid("stdin"), 3)))
    assert human.code == 0, human.stderr
    assert human.stdout.strip() == "queued 3 message(s) from standard input"


def test_batch_from_standard_input_through_the_engine(engine_home: Path) -> None:
    """`--batch -` with the engine running: queued through it, then applied."""
    prefix = uid("stdin-engine")
    result = run_nereus("--json", "message", "schedule", "--batch", "-", "--wait",
                        home=engine_home, input_text=_stdin_lines(_batch_lines(prefix, 20)))
    assert result.code == 0, result.stderr
    receipts = one_json(result)["receipts"]
    assert [(r["evidence"], r["result"]) for r in receipts] == [("APPLIED", "APPLIED")] * 20


@pytest.mark.parametrize(("given", "words"), [
    ("", "no messages in standard input"),
    ("\n\n", "no messages in standard input"),
    ('{"lane": "local", "delay": "1m"}\n{"lane": "local", "delay": "soon"}\n', "line 2:"),
])
def test_bad_standard_input_exits_2_and_queues_nothing(offline_home: Path, given: str,
                                                       words: str) -> None:
    """Nothing, only blank lines or a bad line on standard input exit 2 saying so; nothing
    is queued."""
    before = log_ends(offline_home)
    result = run_nereus("--json", "message", "schedule", "--batch", "-", home=offline_home,
                        input_text=given)
    assert result.code == 2, (result.stdout, result.stderr)
    assert words in one_json(result)["error"]
    assert log_ends(offline_home) == before


def test_standard_input_that_is_not_utf8_is_refused(offline_home: Path) -> None:
    """Bytes that are not UTF-8 on standard input exit 2 naming the byte; nothing is queued."""
    before = log_ends(offline_home)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    proc = subprocess.run(
        [NEREUS, "--home", str(offline_home), "--json", "message", "schedule", "--batch", "-"],
        input=b'{"lane": "local", "delay": "1m"}\n\xff\n', capture_output=True, env=environ,
        timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "--batch -: not UTF-8 at byte 33" in json.loads(proc.stdout)["error"]
    assert log_ends(offline_home) == before
