"""Scenarios for ``test_typed_documents``: the operator mutations (every form: planned with
--dry-run, QUEUED without the engine, APPLIED with --wait, a re-run that finds the first
result, several mutations from one file), ``attempt list`` and ``message schedule``
(inline, large payload, --batch). Each runs the command as an operator would in a fresh
home and returns the documents it printed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.polling import days_ahead, wait_until
from tests.uncertain import make_unknown_attempt

WHEN = days_ahead(300)
WHY = ("--reason", "typed documents")

Document = dict[str, Any]


def _doc(*args: str, home: Path, code: int = 0) -> Document:
    result = run_nereus("--json", *args, home=home)
    assert result.code == code, (args, result.stdout, result.stderr)
    doc: Document = result.json()
    return doc


def _schedule(home: Path, message_id: str, *extra: str) -> Document:
    return _doc("message", "schedule", "--lane", "local", "--deliver-at", WHEN, "--id",
                message_id, *extra, home=home)


def _forms(dry: Document, done: Document, *, result: str) -> list[Document]:
    """A --dry-run document and an appended one, checked to be the forms they claim."""
    assert dry["dry_run"] is True and dry["result"] == "DRY_RUN", dry
    assert all(r["evidence"] == "DRY_RUN" for r in dry["receipts"]), dry
    assert done["dry_run"] is False and done["result"] == result, done
    return [dry, done]


def _lane_close(home: Path) -> list[Document]:
    """Planned, QUEUED (no engine), then APPLIED under --wait and a re-run's first result."""
    _schedule(home, "typed-lane")
    dry = _doc("lane", "close", "local", *WHY, "--dry-run", home=home)
    assert dry["impact"]["lanes"] and dry["impact"]["messages_held"] == 1, dry
    queued = _doc("lane", "close", "local", *WHY, "--yes", home=home)
    with running_engine(home):
        applied = _doc("lane", "close", "local", "--reason", "again", "--yes", "--wait",
                       home=home)
        again = _doc("lane", "close", "local", "--reason", "again", "--yes", "--wait",
                     home=home)
    assert all(r["duplicate_of"] is not None for r in again["receipts"]), again
    return [*_forms(dry, queued, result="QUEUED"), applied, again]


def _lane_open(home: Path) -> list[Document]:
    _doc("lane", "close", "local", *WHY, "--yes", home=home)
    dry = _doc("lane", "open", "local", *WHY, "--dry-run", home=home)
    return _forms(dry, _doc("lane", "open", "local", *WHY, home=home), result="QUEUED")


def _lane_set(home: Path) -> list[Document]:
    """A policy change: each changed setting with its from and to."""
    args = ("lane", "set", "local", "--capacity", "3", "--retry-max", "2", *WHY)
    dry = _doc(*args, "--dry-run", home=home)
    assert dry["impact"]["lanes"][0]["changed"]["capacity"] == {"from": None, "to": 3}, dry
    return _forms(dry, _doc(*args, home=home), result="QUEUED")


def _shard_pause(home: Path) -> list[Document]:
    """shard_pause appears in the impact of a pause."""
    dry = _doc("shard", "pause", "default/0", *WHY, "--dry-run", home=home)
    assert dry["impact"]["shard_pause"] == ["default/0: paused"], dry
    done = _doc("shard", "pause", "default/0", *WHY, "--yes", home=home)
    return _forms(dry, done, result="QUEUED")


def _shard_resume(home: Path) -> list[Document]:
    """A resume applied under --wait."""
    _doc("shard", "pause", "default/1", *WHY, "--yes", home=home)
    dry = _doc("shard", "resume", "default/1", *WHY, "--dry-run", home=home)
    with running_engine(home):
        done = _doc("shard", "resume", "default/1", *WHY, "--wait", home=home)
    return _forms(dry, done, result="APPLIED")


def _message_break(home: Path) -> list[Document]:
    """A dry run that would be REJECTED (no such message: exit 1) and one that would apply."""
    _schedule(home, "typed-break")
    missing = _doc("message", "break", "typed-none", *WHY, "--dry-run", home=home, code=1)
    assert missing["receipts"][0]["would_result"] == "REJECTED", missing
    dry = _doc("message", "break", "typed-break", *WHY, "--dry-run", home=home)
    assert dry["impact"]["message_transitions"] == {"SCHEDULED->FAILED": 1}, dry
    done = _doc("message", "break", "typed-break", *WHY, "--yes", home=home)
    return [missing, *_forms(dry, done, result="QUEUED")]


def _unknown_attempt(home: Path) -> None:
    make_unknown_attempt(home, "typed-order", "typed-ghost", partitions=2)


def _attempt_resolve(home: Path) -> list[Document]:
    """An UNKNOWN attempt planned, settled under --wait, and settled again (first result)."""
    _unknown_attempt(home)
    args = ("attempt", "resolve", "typed-ghost", "--published", "--evidence", "offset 41",
            "--unverified", *WHY)
    with running_engine(home):
        dry = _doc(*args, "--dry-run", home=home)
        assert dry["impact"]["attempts"][0]["from"] == "UNKNOWN", dry
        done = _doc(*args, "--yes", "--wait", home=home)
        again = _doc(*args, "--yes", "--wait", home=home)
    assert again["receipts"][0]["duplicate_of"] == done["receipts"][0]["source_position"]
    return [*_forms(dry, done, result="APPLIED"), again]


def _attempt_list(home: Path) -> list[Document]:
    """Each row of the array is one open attempt; its evidence_search is null until the
    evidence worker has looked, then says when and what it found."""
    config = home / "nereus.toml"
    config.write_text(config.read_text() + "\n[engine]\nevidence_interval_s = 0.2\n")
    _unknown_attempt(home)

    def rows() -> list[Document]:
        result = run_nereus("--json", "attempt", "list", home=home)
        assert result.code == 0, result.stderr
        listed: list[Document] = result.json()
        assert [row["attempt_id"] for row in listed] == ["typed-ghost"], listed
        return listed

    with running_engine(home):
        first = rows()
        searched = wait_until("an evidence search of typed-ghost",
                              lambda: [row for row in rows() if row["evidence_search"]], 20)
    assert searched[0]["evidence_search"]["found"] is None, searched
    return [*first, *searched]


def _mutate_submit(home: Path) -> list[Document]:
    """One mutation and several ([[mutation]] tables), each planned and then appended."""
    one = home / "one.toml"
    one.write_text('kind = "LANE_GATE"\nlane = "local"\ngate = "CLOSED"\nreason = "t"\n')
    several = home / "several.toml"
    several.write_text('[[mutation]]\nkind = "LANE_GATE"\nlane = "local"\ngate = "OPEN"\n'
                       'reason = "t"\n[[mutation]]\nkind = "SHARD_PAUSE"\n'
                       'shard = "default/1"\nreason = "t"\n')
    docs = _forms(_doc("mutate", "submit", str(one), "--dry-run", home=home),
                  _doc("mutate", "submit", str(one), "--yes", home=home), result="QUEUED")
    planned = _doc("mutate", "submit", str(several), "--dry-run", home=home)
    done = _doc("mutate", "submit", str(several), "--yes", home=home)
    assert len(planned["mutations"]) == len(done["mutations"]) == 2
    assert planned["result"] == "DRY_RUN" and done["result"] == "QUEUED"
    return [*docs, planned, done]


def _message_schedule(home: Path) -> list[Document]:
    """QUEUED, APPLIED (--wait), the large-payload path and a --batch with a REJECTED line."""
    config = home / "nereus.toml"
    config.write_text(config.read_text().replace("max_inline_payload_bytes = 65536",
                                                 "max_inline_payload_bytes = 64"))
    queued = _schedule(home, "typed-s1")
    big = home / "big.bin"
    big.write_bytes(b"x" * 1000)
    large = _schedule(home, "typed-big", "--payload-file", str(big))
    assert len(large["payload_stages"]) == 2, large
    batch = home / "batch.jsonl"
    later = days_ahead(350)
    batch.write_text(f'{{"id": "typed-b1", "lane": "local", "deliver_at": "{WHEN}"}}\n'
                     f'{{"id": "typed-s1", "lane": "local", "deliver_at": "{later}"}}\n')
    with running_engine(home):
        applied = _schedule(home, "typed-s2", "--wait")
        lines = _doc("message", "schedule", "--batch", str(batch), "--wait", home=home, code=1)
    assert "result" not in queued and applied["result"] == "APPLIED"
    assert [r["line"] for r in lines["receipts"]] == [1, 2] and lines["rejected"] == 1, lines
    return [queued, applied, large, lines]


MUTATION_SCENARIOS: dict[str, Callable[[Path], list[Document]]] = {
    "lane close": _lane_close,
    "lane open": _lane_open,
    "lane set": _lane_set,
    "shard pause": _shard_pause,
    "shard resume": _shard_resume,
    "message break": _message_break,
    "attempt resolve": _attempt_resolve,
    "attempt list": _attempt_list,
    "mutate submit": _mutate_submit,
    "message schedule": _message_schedule,
}
