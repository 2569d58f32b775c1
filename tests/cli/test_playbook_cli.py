"""``nereus playbook`` run as an operator would (the installed CLI in a subprocess), with no
engine: list, show, dry runs that write nothing, usage errors, confirmation points without
a terminal, and runs that resume from their journal without repeating completed steps."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEREUS, run_nereus
from tests.polling import wait_until

SHIPPED = ["checkpoint-cycle", "drain-and-close-lane", "pre-upgrade-check",
           "recover-on-new-home", "reopen-lane", "replace-node", "resolve-uncertain",
           "rolling-restart", "settle-lane-uncertain"]

# Offline steps whose side effect is countable: each `message schedule` appends one record
# to the (single) shard's log, whether or not it was ever appended before.
SCHEDULE = '["message", "schedule", "--lane", "local", "--delay", "1h", "--payload", "x"]'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with one shard, so `shard list` has one row whose log end counts records."""
    path = tmp_path / "home"
    assert run_nereus("init", home=path).code == 0
    return path


def log_end(home: Path) -> int:
    """Records appended to default/0 after its route identity (position 0, written with the
    first append)."""
    result = run_nereus("--json", "shard", "list", home=home)
    assert result.code == 0, result.stderr
    end: int = result.json()[0]["log_end_position"] or 0
    return max(end - 1, 0)


def write_playbook(home: Path, name: str, text: str) -> Path:
    path = home / "playbooks" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def journal(home: Path, name: str) -> list[dict[str, Any]]:
    path = home / "playbooks" / "journal" / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*")}


def test_list_and_show(home: Path) -> None:
    """list names the eight shipped runbooks and what they need; show prints one as written."""
    listed = run_nereus("--json", "playbook", "list", home=home)
    assert listed.code == 0, listed.stderr
    rows = {row["name"]: row for row in listed.json()}
    assert sorted(rows) == SHIPPED
    assert rows["resolve-uncertain"]["required_vars"] == ["attempt", "outcome", "evidence"]
    assert all(row["origin"] == "shipped" and row["error"] is None for row in rows.values())
    shown = run_nereus("--json", "playbook", "show", "checkpoint-cycle", home=home)
    assert shown.code == 0, shown.stderr
    data = shown.json()
    assert [s["id"] for s in data["steps"]] == ["take", "verify", "prune", "recovery_set"]
    assert data["steps"][1]["run"] == ["checkpoint", "verify", "{steps.take.checkpoint_id}"]
    human = run_nereus("playbook", "show", "drain-and-close-lane", home=home)
    assert "wait until:" in human.stdout and "confirm:" in human.stdout
    missing = run_nereus("playbook", "show", "nope", home=home)
    assert missing.code == 3 and "no playbook named 'nope'" in missing.stderr


def test_dry_run_prints_the_whole_plan_and_writes_nothing(home: Path) -> None:
    """Every step with variables filled in, its checks, waits and confirmation; no journal,
    no Shard Log record, no file touched."""
    before = snapshot(home)
    result = run_nereus("--json", "playbook", "run", "drain-and-close-lane", "--dry-run",
                        "--var", "lane=local", "--var", "reason=disk swap", home=home)
    assert result.code == 0, result.stderr
    plan = result.json()
    assert plan["dry_run"] is True and plan["variables"]["lane"] == "local"
    close = plan["steps"][1]
    assert close["run"] == ["lane", "close", "--reason=disk swap",
                            "--idempotency-key=playbook-<run_id>-close", "--yes", "--wait",
                            "--", "local"]
    assert close["confirm"].startswith("Close lane local? No new Publish Admission")
    assert "<find(steps.lane_exists, 'lane', lane).due_backlog>" in close["confirm"]
    assert plan["steps"][2]["wait"] == {
        "until": plan["steps"][2]["wait"]["until"], "timeout_ms": 600_000, "interval_ms": 1000}
    human = run_nereus("playbook", "run", "checkpoint-cycle", "--dry-run", home=home)
    assert human.code == 0, human.stderr
    assert "nereus --json checkpoint verify -- '<steps.take.checkpoint_id>'" in human.stdout
    assert "post:    output.ok == true" in human.stdout
    assert snapshot(home) == before
    assert not (home / "playbooks").exists()
    assert log_end(home) == 0


def test_usage_errors_exit_2_before_anything_is_written(home: Path) -> None:
    """A missing required variable, an unknown one, a bad choice or a bad --var: exit 2 with
    what to pass, and no journal."""
    missing = run_nereus("playbook", "run", "drain-and-close-lane", home=home)
    assert missing.code == 2
    assert "needs variable(s): lane (the lane to close)" in missing.stderr
    assert "--var lane=VALUE" in missing.stderr
    for args, words in [(["--var", "colour=red"], "no variable(s) colour"),
                        (["--var", "novalue"], "expected NAME=VALUE")]:
        result = run_nereus("playbook", "run", "checkpoint-cycle", *args, home=home)
        assert result.code == 2 and words in result.stderr, result.stderr
    bad_choice = run_nereus("playbook", "run", "resolve-uncertain", "--var", "attempt=a",
                            "--var", "outcome=maybe", "--var", "evidence=e", home=home)
    assert bad_choice.code == 2 and "not one of published, not-published" in bad_choice.stderr
    assert not (home / "playbooks").exists()


def test_a_broken_home_playbook_is_reported_with_its_line(home: Path) -> None:
    """An operator's playbook with a mistake: list marks it unusable, run exits 2 naming
    file, line, step and field; it shadows the shipped one of the same name."""
    path = write_playbook(home, "reopen-lane", 'description = "mine"\n\n[[steps]]\nid = "a"\n'
                          'title = "A"\nrun = ["lane", "list"]\npost = ["output.ok =="]\n')
    rows = {r["name"]: r for r in run_nereus("--json", "playbook", "list", home=home).json()}
    assert rows["reopen-lane"]["origin"] == "home" and rows["reopen-lane"]["shadows_shipped"]
    assert "post" in rows["reopen-lane"]["error"]
    result = run_nereus("playbook", "run", "reopen-lane", home=home)
    assert result.code == 2
    assert f"{path}:7: step 'a': post: in `output.ok ==`" in result.stderr


CONFIRMING = f'''
description = "Schedule one message after asking."

[[steps]]
id = "look"
title = "Look at the shards"
run = ["shard", "list"]
post = ["len(output) == 1"]

[[steps]]
id = "schedule"
title = "Schedule a message"
confirm = "Schedule on {{len(steps.look)}} shard(s), {{steps.look[0].shard}}?"
run = {SCHEDULE}
post = ["output.evidence == 'QUEUED'"]
'''


def test_a_confirmation_without_a_terminal_stops_with_exit_2(home: Path) -> None:
    """Without a terminal and without --yes the run stops at the confirmation point (exit 2,
    never waiting for input); --resume --yes continues there and runs the step once."""
    write_playbook(home, "confirming", CONFIRMING)
    stopped = run_nereus("playbook", "run", "confirming", home=home, input_text="", timeout=60)
    assert stopped.code == 2, stopped.stderr
    assert "asks for confirmation (Schedule on 1 shard(s), default/0?)" in stopped.stderr
    assert "pass --yes" in stopped.stderr
    assert log_end(home) == 0
    assert journal(home, "confirming")[-1]["reason"] == "needs_confirmation"
    resumed = run_nereus("--json", "playbook", "run", "confirming", "--resume", "--yes",
                         home=home, input_text="")
    assert resumed.code == 0, resumed.stderr
    report = resumed.json()
    assert report["ok"] and report["resumed"]
    assert [s["status"] for s in report["steps"]] == ["done_before", "ok"]
    assert log_end(home) == 1


def test_a_confirmation_on_a_terminal_asks(home: Path) -> None:
    """On a terminal the question is asked; 'n' declines (exit 1, nothing done), 'y' runs."""
    write_playbook(home, "confirming", CONFIRMING)

    def answer(text: bytes) -> subprocess.CompletedProcess[bytes]:
        primary, secondary = os.openpty()
        try:
            environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
            proc = subprocess.Popen([NEREUS, "--home", str(home), "playbook", "run",
                                     "confirming"], stdin=secondary, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env={**environ, "NO_COLOR": "1"})
            os.write(primary, text)
            out, err = proc.communicate(timeout=60)
            return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        finally:
            os.close(primary)
            os.close(secondary)

    declined = answer(b"n\n")
    assert declined.returncode == 1, declined.stderr
    assert b"step schedule: Schedule on 1 shard(s), default/0?" in declined.stderr
    assert b"declined" in declined.stdout
    assert log_end(home) == 0
    accepted = answer(b"y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert log_end(home) == 1


FAILS_FIRST = f'''
description = "Schedule, then insist on two records in the log."

[vars.want]
description = "records the log must hold"
type = "int"
default = 2

[[steps]]
id = "schedule"
title = "Schedule a message"
run = {SCHEDULE}

[[steps]]
id = "count"
title = "The log holds enough records"
run = ["shard", "list"]
post = ["output[0].log_end_position > want"]
on_failure = "the log ends at {{output[0].log_end_position}}; schedule more, then --resume"
'''


def test_a_failed_run_resumes_without_repeating_completed_steps(home: Path) -> None:
    """A failed check stops the run (exit 1) with its guidance; once fixed, --resume starts
    at the failed step, so the completed one does not append a second record."""
    write_playbook(home, "fails-first", FAILS_FIRST)
    failed = run_nereus("playbook", "run", "fails-first", home=home)
    assert failed.code == 1
    assert "`output[0].log_end_position > want` is false" in failed.stdout
    assert "the log ends at 2; schedule more, then --resume" in failed.stdout
    assert log_end(home) == 1
    before = (home / "playbooks" / "journal" / "fails-first.jsonl").read_bytes()
    preview = run_nereus("--json", "playbook", "run", "fails-first", "--resume", "--dry-run",
                         home=home)
    assert preview.code == 0, preview.stderr
    assert preview.json()["resume_from"] == "count"
    assert [s["done_before"] for s in preview.json()["steps"]] == [True, False]
    assert (home / "playbooks" / "journal" / "fails-first.jsonl").read_bytes() == before
    refused = run_nereus("playbook", "run", "fails-first", "--resume", "--var", "want=1",
                         home=home)
    assert refused.code == 2
    assert "these differ: want=1 (the run has want=2)" in refused.stderr
    assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--payload",
                      "y", home=home).code == 0
    resumed = run_nereus("--json", "playbook", "run", "fails-first", "--resume", home=home)
    assert resumed.code == 0, resumed.stderr
    assert [s["status"] for s in resumed.json()["steps"]] == ["done_before", "ok"]
    assert log_end(home) == 2
    again = run_nereus("playbook", "run", "fails-first", "--resume", home=home)
    assert again.code == 2 and "nothing to resume" in again.stderr


KILLED = f'''
description = "Two records, then wait for two more."

[[steps]]
id = "one"
title = "First record"
run = {SCHEDULE}

[[steps]]
id = "two"
title = "Second record"
run = {SCHEDULE}

[[steps]]
id = "more"
title = "Wait for four records"
run = ["shard", "list"]
wait = {{ until = "output[0].log_end_position > 4", timeout = "2m", interval = "100ms" }}
'''


def test_a_killed_run_resumes_after_its_last_completed_step(home: Path) -> None:
    """SIGKILL the runner while it waits in step 3: --resume runs only step 3 again (the
    log shows steps 1 and 2 appended once each), with the same run id."""
    write_playbook(home, "killed", KILLED)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    runner = subprocess.Popen([NEREUS, "--home", str(home), "playbook", "run", "killed"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**environ, "NO_COLOR": "1"})
    try:
        path = home / "playbooks" / "journal" / "killed.jsonl"
        wait_until("the runner to reach step 3",
                   lambda: path.exists() and b'"step":"more"' in path.read_bytes(), 60)
    finally:
        runner.kill()
        runner.wait(timeout=30)
    assert log_end(home) == 2
    first_run = journal(home, "killed")
    assert first_run[-1]["event"] == "step_started" and first_run[-1]["step"] == "more"
    for payload in ("a", "b"):
        assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h",
                          "--payload", payload, home=home).code == 0
    resumed = run_nereus("--json", "playbook", "run", "killed", "--resume", home=home)
    assert resumed.code == 0, resumed.stderr
    report = resumed.json()
    assert report["run_id"] == first_run[0]["run_id"]
    assert [s["status"] for s in report["steps"]] == ["done_before", "done_before", "ok"]
    assert log_end(home) == 4
    started = [e["step"] for e in journal(home, "killed") if e["event"] == "step_started"]
    assert started == ["one", "two", "more", "more"]


@pytest.fixture
def two_shards(tmp_path: Path) -> Path:
    """A home with two shards and no engine: pre-upgrade-check's per-shard step has two
    items, each failing (no checkpoint, no log yet)."""
    path = tmp_path / "two"
    assert run_nereus("init", "--partitions", "2", home=path).code == 0
    return path


def test_a_failed_check_reads_well(two_shards: Path) -> None:
    """pre-upgrade-check on a home with no checkpoint: each for_each item is shown under its
    own command with its verdict, a failed check says what the command itself said (its
    failed checks), and the advice of the step and of the playbook print as lines, not with
    a literal \\x0a."""
    human = run_nereus("playbook", "run", "pre-upgrade-check", "--yes", home=two_shards,
                       input_text="")
    assert human.code == 1, human.stderr
    out = human.stdout
    assert "\\x0a" not in out
    lines = [line.rstrip() for line in out.splitlines()]
    first = lines.index("    nereus recovery-set verify -- default/0")
    assert lines[first:first + 8] == [
        "    nereus recovery-set verify -- default/0",
        "      ✗ default/0: `output.ok == true` is false: output.ok = false",
        "          members: no catalogued checkpoint for default/0: recovery would have to "
        "replay the whole log",
        "          log_retention: no Shard Log for default/0 in this home",
        "    nereus recovery-set verify -- default/1",
        "      ✗ default/1: `output.ok == true` is false: output.ok = false",
        "          members: no catalogued checkpoint for default/1: recovery would have to "
        "replay the whole log",
        "          log_retention: no Shard Log for default/1 in this home"], out
    assert "  ✗ recovery_sets failed: 2 of 2 item(s) failed: default/0, default/1" in lines
    advice = lines.index("    on failure: A shard without a verified Recovery Set cannot be "
                         "restored after a failed upgrade. Take a checkpoint of it (`nereus "
                         "playbook run checkpoint-cycle --var shard=SHARD`) and look at the "
                         "failed check.")
    assert lines[advice + 1] == ("    Do not upgrade yet. Fix what failed, then run this "
                                 "playbook again (a new run, not --resume).")
    report = run_nereus("--json", "playbook", "run", "pre-upgrade-check", "--yes",
                        home=two_shards, input_text="").json()
    step = next(s for s in report["steps"] if s["id"] == "recovery_sets")
    assert step["args"] == ["recovery-set verify -- default/0",
                            "recovery-set verify -- default/1"]
    assert ("[default/1] `output.ok == true` is false: output.ok = false — the command says: "
            "members: no catalogued checkpoint for default/1") in step["detail"]


def test_a_dry_run_shows_the_commands_a_run_would_run(two_shards: Path) -> None:
    """--dry-run runs the read-only steps later steps need (`shard list`), so a for_each step
    shows each command it would run; a hole that needs a step that changes something stays
    <...> and the plan says why; nothing in the home changes."""
    before = snapshot(two_shards)
    result = run_nereus("--json", "playbook", "run", "pre-upgrade-check", "--dry-run",
                        home=two_shards)
    assert result.code == 0, result.stderr
    plan = result.json()
    assert plan["read"] == ["shards"]
    verify = next(s for s in plan["steps"] if s["id"] == "recovery_sets")
    assert verify["commands"] == [["recovery-set", "verify", "--", "default/0"],
                                  ["recovery-set", "verify", "--", "default/1"]]
    assert verify["not_known"] == []
    human = run_nereus("playbook", "run", "pre-upgrade-check", "--dry-run", home=two_shards)
    assert "run:     nereus --json recovery-set verify -- default/0\n" in human.stdout
    assert "run:     nereus --json recovery-set verify -- default/1\n" in human.stdout
    assert "<item>" not in human.stdout
    assert "read to fill in the plan: shards" in human.stdout
    cycle = run_nereus("playbook", "run", "checkpoint-cycle", "--dry-run", "--var",
                       "shard=default/1", home=two_shards)
    assert cycle.code == 0, cycle.stderr
    assert ("not known before the run: step take changes something: a dry run does not run "
            "it") in cycle.stdout
    assert snapshot(two_shards) == before
    assert not (two_shards / "playbooks").exists()
