"""Operator mutations as an operator runs them: the installed ``nereus``, a fresh home.

Each test names the property it shows: idempotent re-runs, ordering with
client commands, the reason requirement, STALE against a changed precondition, dry runs
that write nothing, no prompt without a terminal, and the log as the audit trail.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import NEREUS, run_nereus
from tests.daemon import running_engine
from tests.polling import wait_until
from tests.uncertain import make_unknown_attempt


def _init(tmp_path: Path, partitions: int = 1) -> Path:
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", str(partitions), home=home).code == 0
    return home


def _ok(*args: str, home: Path, code: int = 0) -> dict[str, Any]:
    """The command's JSON document (an object)."""
    result = run_nereus("--json", *args, home=home)
    assert result.code == code, (result.code, result.stdout, result.stderr)
    data = result.json()
    assert isinstance(data, dict), data
    return data


def _rows(*args: str, home: Path) -> list[dict[str, Any]]:
    """The rows a listing command prints (a JSON array of objects)."""
    result = run_nereus("--json", *args, home=home)
    assert result.code == 0, (result.code, result.stdout, result.stderr)
    rows = result.json()
    assert isinstance(rows, list) and all(isinstance(row, dict) for row in rows), rows
    return rows


def _log(home: Path, shard: str = "default/0", *extra: str) -> list[dict[str, Any]]:
    """The decoded Shard Log (empty when nothing was ever appended, so no log exists)."""
    result = run_nereus("--json", "shard", "log", shard, *extra, home=home)
    if result.code == 3 and "no shard log" in result.json()["error"]:
        return []
    assert result.code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line]


def _lane(home: Path, name: str = "local") -> dict[str, Any]:
    lanes = _rows("lane", "list", home=home)
    return next(lane for lane in lanes if lane["lane"] == name)


def test_lane_close_and_open_apply_through_the_engine_and_rerunning_is_a_no_op(
        tmp_path: Path) -> None:
    """lane close/open apply on every shard with the operator and reason recorded; a rerun
    appends nothing."""
    home = _init(tmp_path, partitions=2)
    with running_engine(home):
        closed = _ok("lane", "close", "local", "--reason", "INC-1: broker degraded", "--as",
                     "alice", "--yes", "--wait", home=home)
        assert closed["kind"] == "LANE_GATE" and closed["result"] == "APPLIED"
        assert closed["operator"] == "alice"
        assert closed["operator_reason"] == "INC-1: broker degraded"
        assert {r["shard"] for r in closed["receipts"]} == {"default/0", "default/1"}
        assert all(r["evidence"] == "APPLIED" and r["duplicate_of"] is None
                   for r in closed["receipts"])
        assert _lane(home)["gate"] == "CLOSED"
        log_before = _log(home)
        again = _ok("lane", "close", "local", "--reason", "INC-1: broker degraded", "--as",
                    "alice", "--yes", "--wait", home=home)
        assert again["result"] == "APPLIED"
        assert [r["duplicate_of"] for r in again["receipts"]] == \
            [r["source_position"] for r in closed["receipts"]]
        assert _log(home) == log_before, "a re-run must append nothing"
        opened = _ok("lane", "open", "local", "--reason", "INC-1 resolved", "--wait", home=home)
        assert opened["result"] == "APPLIED" and _lane(home)["gate"] == "OPEN"


def test_lane_set_changes_policy_and_needs_something_to_change(tmp_path: Path) -> None:
    """lane set reports each policy change (from, to); with nothing to change it is refused."""
    home = _init(tmp_path)
    with running_engine(home):
        done = _ok("lane", "set", "local", "--capacity", "3", "--retry-max", "2", "--reason",
                   "tighten", "--wait", home=home)
        assert done["result"] == "APPLIED"
        lanes = done["impact"]["lanes"]
        assert lanes[0]["changed"]["capacity"] == {"from": None, "to": 3}
        assert lanes[0]["changed"]["retry_max"]["to"] == 2
    nothing = run_nereus("lane", "set", "local", "--reason", "x", home=home)
    assert nothing.code == 2 and "nothing to change" in nothing.stderr


def test_a_mutation_is_rejected_without_a_reason(tmp_path: Path) -> None:
    """A missing or blank --reason is a usage error and nothing is appended."""
    home = _init(tmp_path)
    missing = run_nereus("lane", "open", "local", home=home)
    assert missing.code == 2 and "--reason" in missing.stderr
    blank = run_nereus("lane", "open", "local", "--reason", "   ", home=home)
    assert blank.code == 2 and "reason" in blank.stderr
    assert _log(home) == []


def test_unknown_lane_is_not_found(tmp_path: Path) -> None:
    """A mutation of a lane the configuration does not name exits 3."""
    home = _init(tmp_path)
    result = run_nereus("lane", "close", "nope", "--reason", "x", "--yes", home=home)
    assert result.code == 3 and "no lane 'nope'" in result.stderr


def test_dry_run_says_what_would_change_and_writes_nothing(tmp_path: Path) -> None:
    """--dry-run reports the messages held and the precondition digest, and appends nothing."""
    home = _init(tmp_path)
    for index in range(3):
        assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--id",
                          f"m{index}", "--payload", "x", home=home).code == 0
    with running_engine(home):
        log_before = _log(home)
        plan = _ok("lane", "close", "local", "--reason", "maintenance", "--dry-run", home=home)
        assert plan["dry_run"] is True and plan["result"] == "DRY_RUN"
        assert plan["impact"]["messages_held"] == 3
        assert plan["impact"]["lanes"][0]["changed"]["gate"] == {"from": "OPEN", "to": "CLOSED"}
        receipt = plan["receipts"][0]
        assert receipt["would_result"] == "APPLIED" and receipt["source_position"] is None
        broken = _ok("message", "break", "m1", "--reason", "poison", "--dry-run", home=home)
        assert broken["impact"]["message_transitions"] == {"SCHEDULED->FAILED": 1}
        assert _log(home) == log_before
        assert _lane(home)["gate"] == "OPEN"
        shown = _ok("message", "show", "m1", home=home)
        assert shown["state"] == "SCHEDULED"


def test_a_destructive_mutation_without_a_terminal_refuses_instead_of_prompting(
        tmp_path: Path) -> None:
    """Without a terminal and without --yes a destructive mutation exits 2 and appends nothing."""
    home = _init(tmp_path)
    result = run_nereus("lane", "close", "local", "--reason", "x", home=home, timeout=20)
    assert result.code == 2
    assert "--yes" in result.stderr and "no terminal" in result.stderr
    assert _log(home) == []


def _on_a_terminal(home: Path, answer: bytes, *args: str) -> tuple[int, str]:
    """Run ``nereus`` with a pseudo-terminal on stdin; type ``answer`` at the prompt."""
    controller, terminal = os.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    env["NO_COLOR"] = "1"
    proc = subprocess.Popen([NEREUS, "--home", str(home), *args], stdin=terminal,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    os.close(terminal)
    os.write(controller, answer)
    _, err = proc.communicate(timeout=60)
    os.close(controller)
    return proc.returncode, err.decode()


def test_on_a_terminal_a_destructive_mutation_asks_and_no_writes_nothing(
        tmp_path: Path) -> None:
    """On a terminal the mutation asks: no appends nothing (exit 1), yes appends it."""
    home = _init(tmp_path)
    code, err = _on_a_terminal(home, b"n\n", "lane", "close", "local", "--reason", "x")
    assert code == 1 and "not confirmed" in err and "Change the gate of lane local" in err
    assert _log(home) == []
    code, err = _on_a_terminal(home, b"y\n", "lane", "close", "local", "--reason", "x")
    assert code == 0, err
    assert [entry["kind"] for entry in _log(home)] == ["ROUTE_IDENTITY", "LANE_GATE"]


def test_a_mutation_planned_against_state_that_changed_is_rejected_as_stale(
        tmp_path: Path) -> None:
    """A mutation carrying a precondition digest that no longer matches is STALE (exit 1)."""
    home = _init(tmp_path)
    with running_engine(home):
        seen = _ok("lane", "close", "local", "--reason", "planned", "--dry-run", home=home)
        digest = seen["receipts"][0]["precondition_digest"]
        _ok("lane", "set", "local", "--capacity", "2", "--reason", "someone else", "--wait",
            home=home)
        stale = _ok("lane", "close", "local", "--reason", "planned", "--precondition", digest,
                    "--yes", "--wait", home=home, code=1)
        assert stale["result"] == "STALE"
        assert stale["receipts"][0]["reason"] == "PRECONDITION_STALE"
        assert _lane(home)["gate"] == "OPEN"
        # planned against what is there now, it applies
        fresh = _ok("lane", "close", "local", "--reason", "planned", "--yes", "--wait",
                    home=home)
        assert fresh["result"] == "APPLIED" and _lane(home)["gate"] == "CLOSED"


def test_mutations_without_the_engine_go_straight_to_the_log_in_order_with_commands(
        tmp_path: Path) -> None:
    """A break queued before the message exists loses; queued after its SCHEDULE, it wins."""
    home = _init(tmp_path)
    early = _ok("message", "break", "late", "--reason", "too early", "--yes", home=home)
    assert early["result"] == "QUEUED" and early["receipts"][0]["evidence"] == "QUEUED"
    assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--id", "late",
                      "--payload", "x", home=home).code == 0
    assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--id",
                      "target", "--payload", "x", home=home).code == 0
    later = _ok("message", "break", "target", "--reason", "poison", "--yes", home=home)
    assert later["receipts"][0]["source_position"] == 4  # after the identity at 0
    with running_engine(home):
        assert _ok("message", "show", "late", "--barrier", home=home)["state"] == "SCHEDULED"
        target = _ok("message", "show", "target", "--barrier", home=home)
        assert target["state"] == "FAILED" and "BROKEN by" in target["detail"]
        results = {(e["kind"], e["position"]) for e in _log(home)}
    assert ("MESSAGE_BREAK", 1) in results and ("SCHEDULE", 2) in results


def test_shard_pause_and_resume_and_the_log_is_the_audit_trail(tmp_path: Path) -> None:
    """shard pause/resume apply, and the Shard Log shows who did it and why."""
    home = _init(tmp_path)
    with running_engine(home):
        paused = _ok("shard", "pause", "default/0", "--reason", "disk swap", "--as", "bob",
                     "--yes", "--wait", home=home)
        assert paused["result"] == "APPLIED" and paused["impact"]["shard_pause"] == \
            ["default/0: paused"]
        resumed = _ok("shard", "resume", "default/0", "--reason", "disk swapped", "--as",
                      "bob", "--wait", home=home)
        assert resumed["result"] == "APPLIED"
    trail = _log(home, "default/0", "--kind", "SHARD_PAUSE")
    assert len(trail) == 1
    entry = trail[0]
    assert "bob" in entry["summary"] and "disk swap" in entry["summary"]
    assert entry["broker_time"]


def test_mutate_submit_plans_a_file_as_one_unit(tmp_path: Path) -> None:
    """mutate submit plans every mutation of a file together and applies them in order."""
    home = _init(tmp_path)
    spec = tmp_path / "change.toml"
    spec.write_text(
        '[[mutation]]\nkind = "LANE_CONFIG"\nlane = "local"\nquota = 4\nreason = "CHG-7"\n\n'
        '[[mutation]]\nkind = "LANE_GATE"\nlane = "local"\ngate = "CLOSED"\n'
        'reason = "CHG-7"\n')
    with running_engine(home):
        done = _ok("mutate", "submit", str(spec), "--yes", "--wait", home=home)
        assert [m["result"] for m in done["mutations"]] == ["APPLIED", "APPLIED"]
        assert done["result"] == "APPLIED"
        assert _lane(home)["gate"] == "CLOSED"
        again = _ok("mutate", "submit", str(spec), "--yes", "--wait", home=home)
        assert all(m["receipts"][0]["duplicate_of"] is not None for m in again["mutations"])


def test_mutate_submit_names_the_field_at_fault(tmp_path: Path) -> None:
    """A bad mutation file names the field (or the TOML line) at fault, exit 2."""
    home = _init(tmp_path)
    bad = tmp_path / "bad.toml"
    bad.write_text('kind = "LANE_GATE"\nlane = "local"\ngate = "SHUT"\nreason = "x"\n')
    result = run_nereus("mutate", "submit", str(bad), "--yes", home=home)
    assert result.code == 2 and "$.gate" in result.stderr
    bad.write_text('kind = "LANE_GATE"\nlane = "local"\ngate = \n')
    result = run_nereus("mutate", "submit", str(bad), home=home)
    assert result.code == 2 and "line 3" in result.stderr
    bad.write_text('kind = "DROP_TABLE"\nreason = "x"\n')
    result = run_nereus("mutate", "submit", str(bad), home=home)
    assert result.code == 2 and "LANE_GATE" in result.stderr
    assert _log(home) == []


def test_attempt_resolve_settles_an_unknown_attempt_with_evidence(tmp_path: Path) -> None:
    """attempt resolve settles an UNKNOWN attempt only with verifiable evidence (or
    --unverified)."""
    home = _init(tmp_path)
    make_unknown_attempt(home, "order-7", "ghost-7")
    with running_engine(home):
        unknown = _rows("attempt", "list", "--state", "unknown", home=home)
        assert [a["attempt_id"] for a in unknown] == ["ghost-7"]
        assert _ok("message", "show", "order-7", home=home)["state"] == "UNCERTAIN"
        refused = run_nereus("attempt", "resolve", "ghost-7", "--published", "--evidence",
                             "offset 41", "--reason", "checked", home=home)
        assert refused.code == 2
        unchecked = run_nereus("attempt", "resolve", "ghost-7", "--published", "--evidence",
                               "topic orders offset 41", "--reason", "checked", "--yes",
                               home=home)
        assert unchecked.code == 2 and "--unverified" in unchecked.stderr
        plan = _ok("attempt", "resolve", "ghost-7", "--published", "--evidence",
                   "topic orders offset 41", "--unverified", "--reason", "checked the topic",
                   "--dry-run", home=home)
        assert plan["impact"]["attempts"][0]["from"] == "UNKNOWN"
        assert plan["impact"]["message_transitions"] == {"UNCERTAIN->PUBLISHED": 1}
        done = _ok("attempt", "resolve", "ghost-7", "--published", "--evidence",
                   "topic orders offset 41", "--unverified", "--reason", "checked the topic",
                   "--yes", "--wait", home=home)
        assert done["result"] == "APPLIED"
        assert _ok("message", "show", "order-7", home=home)["state"] == "PUBLISHED"
        assert _rows("attempt", "list", "--state", "unknown", home=home) == []
        # settled, it is no longer open; re-running finds it and reports the first result
        again = _ok("attempt", "resolve", "ghost-7", "--published", "--evidence",
                    "topic orders offset 41", "--unverified", "--reason", "checked the topic",
                    "--yes", "--wait", home=home)
        assert again["receipts"][0]["duplicate_of"] == done["receipts"][0]["source_position"]
    missing = run_nereus("attempt", "resolve", "nope", "--published", "--evidence", "e",
                         "--unverified", "--reason", "r", "--yes", home=home)
    assert missing.code == 3


def test_attempt_resolve_prints_times_in_iso_8601(tmp_path: Path) -> None:
    """A NOT_PUBLISHED resolve puts the message back on the timeline: the dry run and the
    applied result say when as ISO-8601 UTC, as every command prints times, not as epoch
    milliseconds."""
    import re

    iso = r"at \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z \(retry 0\)"
    home = _init(tmp_path)
    make_unknown_attempt(home, "order-9", "ghost-9")
    args = ("attempt", "resolve", "ghost-9", "--not-published", "--evidence",
            "no such record", "--unverified", "--reason", "checked")
    with running_engine(home):
        wait_until("the attempt to be UNKNOWN",
                   lambda: bool(_rows("attempt", "list", "--state", "unknown", home=home)), 30)
        plan = _ok(*args, "--dry-run", home=home)
        would = plan["receipts"][0]["would_detail"]
        assert re.fullmatch(f"message back on the timeline {iso}", would), would
        human = run_nereus(*args, "--dry-run", home=home)
        assert re.search(f"would be APPLIED: message back on the timeline {iso}",
                         human.stdout), human.stdout
        assert not re.search(r"\d{13} ms", human.stdout), human.stdout
        done = _ok(*args, "--yes", "--wait", home=home)
        detail = done["receipts"][0]["detail"]
        assert re.fullmatch(f"message back on the timeline {iso}", detail), detail


EVERY_COMMAND = {
    "lane close": ("lane", "close", "local"),
    "lane open": ("lane", "open", "local"),
    "lane set": ("lane", "set", "local", "--quota", "9"),
    "shard pause": ("shard", "pause", "default/0"),
    "shard resume": ("shard", "resume", "default/0"),
    "message break": ("message", "break", "m-break"),
    "attempt resolve": ("attempt", "resolve", "a-1", "--shard", "default/0",
                        "--not-published", "--evidence", "no record at the destination",
                        "--unverified"),
}


def test_every_mutation_command_requires_a_reason(tmp_path: Path) -> None:
    """Every mutation command refuses to run without --reason and appends nothing."""
    home = _init(tmp_path)
    for name, args in EVERY_COMMAND.items():
        result = run_nereus(*args, "--yes", home=home)
        assert result.code == 2 and "--reason" in result.stderr, name
    assert _log(home) == []


def test_every_mutation_command_is_idempotent_when_run_again(tmp_path: Path) -> None:
    """The second run appends nothing and reports the first result, whatever it was."""
    home = _init(tmp_path)
    assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--id",
                      "m-break", "--payload", "x", home=home).code == 0
    with running_engine(home):
        for name, args in EVERY_COMMAND.items():
            first = run_nereus("--json", *args, "--reason", f"test {name}", "--yes", "--wait",
                               home=home)
            assert first.code in (0, 1), (name, first.stderr)
            log_after_first = _log(home)
            again = run_nereus("--json", *args, "--reason", f"test {name}", "--yes", "--wait",
                               home=home)
            assert again.code == first.code, (name, again.stderr)
            one, two = first.json()["receipts"][0], again.json()["receipts"][0]
            assert two["duplicate_of"] == one["source_position"], name
            assert (two["result"], two["reason"]) == (one["result"], one["reason"]), name
            assert _log(home) == log_after_first, f"{name}: a re-run appended a record"
