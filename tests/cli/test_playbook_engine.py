"""Each shipped playbook run to completion against a real engine daemon on the file log,
as an operator would run it (``nereus playbook run NAME --yes --json``), plus
``checkpoint prune`` and ``init --from``, which two of them rely on.

One engine serves the module; its home starts with an attempt in UNKNOWN, produced the
way it happens in production: a previous owner's admission that no outcome followed,
turned UNKNOWN by the next owner's recovery. The lane drain, which needs none, runs on a
home of its own, so no test relies on another having resolved it first.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.engine_homes import init_home
from tests.conftest import CliResult, run_nereus
from tests.daemon import read_outbox, running_engine, stop_engine
from tests.polling import wait_until
from tests.uncertain import make_unknown_attempt

STUCK = "stuck-message"
GHOST = "ghost-attempt"


def playbook(home: Path, name: str, *variables: str, timeout: float = 180) -> CliResult:
    args = [arg for pair in variables for arg in ("--var", pair)]
    return run_nereus("--json", "playbook", "run", name, *args, "--yes", home=home,
                      input_text="", timeout=timeout)


def statuses(result: CliResult) -> dict[str, str]:
    return {step["id"]: step["status"] for step in result.json()["steps"]}


def lane(home: Path, name: str = "local") -> dict[str, Any]:
    lanes = run_nereus("--json", "lane", "list", home=home).json()
    found: dict[str, Any] = next(entry for entry in lanes if entry["lane"] == name)
    return found


@pytest.fixture(scope="module")
def engine_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A two-shard home whose engine runs, with attempt GHOST of message STUCK UNKNOWN."""
    home = tmp_path_factory.mktemp("playbooks") / "home"
    assert run_nereus("init", "--partitions", "2", home=home).code == 0
    # an owner that admitted STUCK and died before any outcome
    make_unknown_attempt(home, STUCK, GHOST, partitions=2)
    with running_engine(home):
        wait_until("the forged attempt to be UNKNOWN",
                   lambda: GHOST in [a["attempt_id"] for a in run_nereus(
                       "--json", "attempt", "list", "--state", "unknown", home=home).json()], 30)
        yield home


@pytest.mark.slow
def test_uncertain_attempt_blocks_the_upgrade_check_until_resolved(engine_home: Path) -> None:
    """checkpoint-cycle gives every shard a verified Recovery Set; pre-upgrade-check then
    fails on the UNKNOWN attempt alone (exit 1, every check still run, with guidance);
    resolve-uncertain settles it; the check passes."""
    for shard in ("default/0", "default/1"):
        cycle = playbook(engine_home, "checkpoint-cycle", f"shard={shard}")
        assert cycle.code == 0, cycle.stdout + cycle.stderr
        report = cycle.json()
        assert report["ok"] and set(statuses(cycle).values()) == {"ok"}
        taken = report["steps"][0]["output"]["checkpoint_id"]
        assert report["steps"][1]["output"]["checkpoint_id"] == taken
        assert Path(report["journal"]).is_file()
    blocked = playbook(engine_home, "pre-upgrade-check")
    assert blocked.code == 1, blocked.stderr
    assert statuses(blocked) == {"doctor": "ok", "engine": "ok", "shards": "ok",
                                 "recovery_sets": "ok", "no_uncertain": "failed"}
    uncertain = blocked.json()["steps"][-1]
    assert uncertain["output"][0]["attempt_id"] == GHOST
    assert "resolve-uncertain" in uncertain["guidance"]
    assert blocked.json()["stopped_at"] is None  # a report: every check ran
    resolved = playbook(engine_home, "resolve-uncertain", f"attempt={GHOST}",
                        "outcome=published", "evidence=consumer audit saw it at offset 7",
                        "check=unverified")
    assert resolved.code == 0, resolved.stdout + resolved.stderr
    assert statuses(resolved) == {"show": "ok", "resolve": "ok", "gone": "ok", "message": "ok"}
    assert resolved.json()["steps"][1]["output"]["result"] == "APPLIED"
    shown = run_nereus("--json", "message", "show", STUCK, home=engine_home).json()
    assert shown["state"] == "PUBLISHED"
    again = playbook(engine_home, "resolve-uncertain", f"attempt={GHOST}", "outcome=published",
                     "evidence=x")
    assert again.code == 1 and again.json()["stopped_at"] == "show"
    passed = playbook(engine_home, "pre-upgrade-check")
    assert passed.code == 0, passed.stdout
    assert passed.json()["ok"] is True


@pytest.fixture
def settled_home(tmp_path: Path) -> Iterator[Path]:
    """A two-shard home whose engine runs, with no attempt UNKNOWN (the module's home has
    one until a test resolves it, so a test needing none does not rely on the order)."""
    home = init_home(tmp_path / "home")
    with running_engine(home):
        yield home


@pytest.mark.slow
def test_drain_and_reopen_a_lane(settled_home: Path) -> None:
    """drain-and-close-lane closes the gate and waits until nothing is in flight; messages
    that fall due meanwhile wait; reopen-lane opens it and waits until they are published."""
    drained = playbook(settled_home, "drain-and-close-lane", "lane=local", "reason=destination "
                       "maintenance")
    assert drained.code == 0, drained.stdout + drained.stderr
    assert statuses(drained) == {"lane_exists": "ok", "close": "ok", "drained": "ok",
                                 "no_uncertain": "ok"}
    closed = lane(settled_home)
    assert closed["gate"] == "CLOSED" and closed["in_flight"] == 0
    held = [f"held-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    for mid in held:
        assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1s", "--id",
                          mid, "--payload", mid, "--wait", home=settled_home).code == 0
    wait_until("the held messages to fall due", lambda: lane(settled_home)["due_backlog"] >= 3, 30)
    outbox = settled_home / "outbox" / "local.jsonl"
    assert not {line["delay_message_id"] for line in read_outbox(outbox)} & set(held)
    reopened = playbook(settled_home, "reopen-lane", "lane=local", "reason=maintenance over")
    assert reopened.code == 0, reopened.stdout + reopened.stderr
    assert reopened.json()["steps"][1]["output"]["result"] == "APPLIED"
    assert set(held) <= {line["delay_message_id"] for line in read_outbox(outbox)}
    opened = lane(settled_home)
    assert opened["gate"] == "OPEN" and opened["due_backlog"] == 0


def test_a_dry_run_fills_in_what_it_can_read(settled_home: Path) -> None:
    """With the engine running, drain-and-close-lane --dry-run reads `lane list` (read-only)
    and shows the confirmation with the lane's numbers instead of <find(steps...)>; the lane
    stays open, no LANE_GATE record is appended, no journal is written."""
    result = run_nereus("--json", "playbook", "run", "drain-and-close-lane", "--dry-run",
                        "--var", "lane=local", "--var", "reason=check", home=settled_home)
    assert result.code == 0, result.stderr
    plan = result.json()
    assert plan["read"] == ["lane_exists"]
    close = plan["steps"][1]
    assert close["confirm"].endswith("(0 due message(s) now, 0 in flight).")
    assert "<" not in close["confirm"] and close["not_known"] == []
    human = run_nereus("playbook", "run", "drain-and-close-lane", "--dry-run", "--var",
                       "lane=local", "--var", "reason=check", home=settled_home)
    assert "(0 due message(s) now, 0 in flight)" in human.stdout
    assert "<find(" not in human.stdout
    assert lane(settled_home)["gate"] == "OPEN"
    for shard in ("default/0", "default/1"):
        gates = run_nereus("--json", "shard", "log", shard, "--kind", "LANE_GATE",
                           home=settled_home)
        assert gates.code == 0 and gates.stdout.strip() == "", gates.stdout
    assert not (settled_home / "playbooks").exists()


def test_checkpoint_prune_needs_yes_and_refuses_recovery_set_members(tmp_path: Path) -> None:
    """prune lists with --dry-run, needs --yes without a terminal, deletes catalog entries
    and files older than --keep, and refuses (exit 1) to delete a Recovery Set member."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    with running_engine(home):
        taken = []
        for _ in range(5):
            result = run_nereus("--json", "checkpoint", "create", "default/0", home=home)
            assert result.code == 0, result.stderr
            taken.append(result.json()["checkpoint_id"])
    dry = run_nereus("--json", "checkpoint", "prune", "default/0", "--keep", "3", "--dry-run",
                     home=home)
    assert dry.code == 0 and dry.json()["deleted"] == taken[:2] and dry.json()["dry_run"]
    unasked = run_nereus("checkpoint", "prune", "default/0", "--keep", "3", home=home,
                         input_text="")
    assert unasked.code == 2 and "pass --yes" in unasked.stderr
    refused = run_nereus("--json", "checkpoint", "prune", "default/0", "--keep", "1", "--yes",
                         home=home)
    assert refused.code == 1
    data = refused.json()
    assert data["deleted"] == taken[:2] and data["kept"] == taken[2:]
    assert [r["checkpoint_id"] for r in data["refused"]] == taken[2:4]
    listed = run_nereus("--json", "checkpoint", "list", "default/0", home=home).json()
    assert [c["checkpoint_id"] for c in listed["checkpoints"]] == taken[2:]
    left = [p for p in (home / "objects").rglob("*") if p.is_file()]
    assert not [p for p in left if taken[0] in str(p) or taken[1] in str(p)]
    assert run_nereus("recovery-set", "verify", "default/0", home=home).code == 0


@pytest.mark.slow
def test_recover_on_new_home_restores_from_the_recovery_set(tmp_path: Path) -> None:
    """The new home gets the old configuration and object store, its engine restores the
    shard from the newest checkpoint (not by replaying from empty), and it has applied
    everything the old home had; the old home is untouched."""
    old, new = tmp_path / "old", tmp_path / "new"
    assert run_nereus("init", home=old).code == 0
    ids = [f"kept-{n}" for n in range(3)]
    with running_engine(old):
        for mid in ids:
            assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h",
                              "--id", mid, "--payload", mid, "--wait", home=old).code == 0
        taken = run_nereus("--json", "checkpoint", "create", "default/0", home=old).json()
        late = run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--id",
                          "after-checkpoint", "--payload", "z", "--wait", home=old)
        assert late.code == 0
    before = run_nereus("--json", "shard", "list", home=old).json()
    recovered = playbook(old, "recover-on-new-home", f"new_home={new}")
    try:
        assert recovered.code == 0, recovered.stdout + recovered.stderr
        report = recovered.json()
        assert set(statuses(recovered).values()) == {"ok"}
        assert report["steps"][-1]["output"]["checkpoint_id"] == taken["checkpoint_id"]
        events = [json.loads(line) for line in
                  (new / "log" / "engine.log").read_text().splitlines()]
        restored = [e for e in events if e.get("event") == "state_restored"]
        assert [e["checkpoint_id"] for e in restored] == [taken["checkpoint_id"]]
        for mid in [*ids, "after-checkpoint"]:
            shown = run_nereus("--json", "message", "show", mid, home=new)
            assert shown.code == 0 and shown.json()["state"] == "SCHEDULED", mid
    finally:
        if (new / "run" / "engine.pid").exists():
            stop_engine(new)
    assert run_nereus("--json", "shard", "list", home=old).json() == before
    assert run_nereus("--json", "engine", "status", home=old).code == 4
