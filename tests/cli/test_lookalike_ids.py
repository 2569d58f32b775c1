"""Ids that would print like another id are refused at the edge, wherever an id is taken:
an invisible or space-like character, a space at either end, only spaces (issue 38 item 4).
The error names the character and its position and says what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nereus.errors import ExitCode
from tests.cli.engine_homes import write_batch
from tests.conftest import CliResult, run_nereus


def _refused(result: CliResult, *words: str) -> dict[str, Any]:
    assert result.code == ExitCode.USAGE, (result.code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    doc: dict[str, Any] = result.json()
    assert doc["ok"] is False and doc["exit_code"] == 2
    for word in words:
        assert word in f"{doc['error']} {doc.get('hint')}", doc
    return doc


@pytest.mark.parametrize(("message_id", "words"), [
    ("a\u200bb", ("invisible", "U+200B", "character 1", "ZERO WIDTH SPACE", "remove it")),
    ("a\u00a0b", ("U+00A0", "character 1", "NO-BREAK SPACE", "a plain space")),
    ("zwj\u200dx", ("U+200D", "character 3", "ZERO WIDTH JOINER")),
    ("\ufeffbom", ("U+FEFF", "character 0")),
    ("soft\u00adhyphen", ("U+00AD", "SOFT HYPHEN")),
    ("ideo\u3000space", ("U+3000", "IDEOGRAPHIC SPACE")),
    ("tag\U000e0041", ("U+E0041", "character 3")),
    (" lead", ("starts with a space", "character 0", "remove it")),
    ("trail ", ("ends with a space", "character 5", "remove it")),
    ("   ", ("only spaces",)),
])
def test_lookalike_ids_are_refused_naming_the_character(home: Path, message_id: str,
                                                        words: tuple[str, ...]) -> None:
    """`message schedule --id` refuses an id that prints like another (exit 2), naming the
    character (code point and name), where it is, and what to do; nothing is queued."""
    _refused(run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1m",
                        "--payload", "x", "--id", message_id, home=home), *words)
    ends = run_nereus("--json", "shard", "list", home=home).json()
    assert all(not s["log_end_position"] for s in ends)


def test_a_space_inside_an_id_is_still_accepted(home: Path) -> None:
    """A plain space inside an id prints as itself: `order 42` is accepted."""
    result = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1m",
                        "--payload", "x", "--id", "order 42", home=home)
    assert result.code == 0, result.stderr
    assert result.json()["delay_message_id"] == "order 42"


def test_every_place_an_id_is_taken_refuses_lookalikes(home: Path, tmp_path: Path) -> None:
    """Batch ids, `cancel ID`, `reschedule ID` and `--command-id` refuse the same ids with
    the same error."""
    batch = write_batch(tmp_path / "batch.jsonl", [
        {"lane": "local", "delay": "1m", "id": "fine"},
        {"lane": "local", "delay": "1m", "id": "zw\u200bsp"},
        {"lane": "local", "delay": "1m", "id": "fine "},
    ])
    doc = _refused(run_nereus("--json", "message", "schedule", "--batch", str(batch),
                              home=home), "2 bad lines")
    assert [(item["line"], "U+200B" in item["error"] or "ends with a space" in item["error"])
            for item in doc["bad_lines"]] == [(2, True), (3, True)]
    _refused(run_nereus("--json", "message", "cancel", "\u2060m", home=home),
             "U+2060", "WORD JOINER")
    _refused(run_nereus("--json", "message", "reschedule", "m ", "--delay", "1m", home=home),
             "ends with a space")
    _refused(run_nereus("--json", "message", "cancel", "m", "--command-id", " c", home=home),
             "--command-id", "starts with a space")


def test_the_schedule_help_says_which_ids_are_refused() -> None:
    """`message schedule --help` tells the operator which ids are refused and why."""
    result = run_nereus("message", "schedule", "--help")
    assert result.code == 0
    text = " ".join(result.stdout.split())
    for words in ("invisible or space-like", "zero-width space", "a space at either end",
                  "only spaces", "a space inside is fine"):
        assert words in text, text
