"""The commands that talk to a running engine, run as an operator would: the installed
``nereus`` in a subprocess, ``--json``. schedule / cancel / reschedule with ``--wait``,
``message show``, due messages published to the outbox, and the lists.

Tests that only read or add uniquely named messages share one engine per module
(``engine_home``, from ``tests/cli/conftest.py``); a test about the engine's own life
starts its own (``test_engine_cli.py``). Every engine started here is stopped by its
fixture, whatever the test did.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from nereus.shard import partition_for
from tests.cli.engine_homes import SHARDS, one_json, uid, utc, write_batch
from tests.conftest import run_nereus
from tests.daemon import read_outbox, running_engine
from tests.polling import days_ahead, wait_until

# schedule / cancel / reschedule with --wait -------------------------------------------------

def test_schedule_wait_gives_the_applied_result(engine_home: Path) -> None:
    """schedule --wait with the engine running answers with evidence and result APPLIED."""
    mid = uid("wait")
    result = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                        "--id", mid, "--payload", "x", "--wait", home=engine_home)
    assert result.code == 0, result.stderr
    data = one_json(result)
    assert data["evidence"] == "APPLIED"
    assert data["result"] == "APPLIED"
    assert data["delay_message_id"] == mid
    assert data["shard"] == f"default/{partition_for(mid, 2)}"
    assert data["position"] == data["source_position"]
    assert data["generation"] == 1


def test_cancel_of_an_unknown_id_is_rejected(engine_home: Path) -> None:
    """cancel --wait of an id no shard knows: result REJECTED with a reason, exit 1."""
    result = run_nereus("--json", "message", "cancel", uid("ghost"), "--wait",
                        home=engine_home)
    assert result.code == 1, result.stderr
    data = one_json(result)
    assert data["evidence"] == "APPLIED"
    assert data["result"] == "REJECTED"
    assert data["reason"]
    human = run_nereus("message", "cancel", uid("ghost"), "--wait", home=engine_home)
    assert human.code == 1 and "REJECTED" in human.stdout


def test_reschedule_and_cancel_after_publish_are_rejected(engine_home: Path) -> None:
    """Once a message is admitted or published, reschedule and cancel are REJECTED."""
    mid = uid("late")
    scheduled = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay",
                           "100ms", "--id", mid, "--wait", home=engine_home)
    assert scheduled.code == 0 and scheduled.json()["result"] == "APPLIED", scheduled.stderr

    def admitted() -> bool:
        shown = run_nereus("--json", "message", "show", mid, home=engine_home)
        return shown.code == 0 and bool(shown.json()["attempts"])

    wait_until(f"{mid} to be admitted", admitted, 15)
    for command in (["reschedule", mid, "--delay", "1h"], ["cancel", mid]):
        result = run_nereus("--json", "message", *command, "--wait", home=engine_home)
        assert result.code == 1, (command, result.stderr)
        data = one_json(result)
        assert data["result"] == "REJECTED", command
        assert data["reason"] in ("ALREADY_ADMITTED", "MESSAGE_TERMINAL"), data


# message show --------------------------------------------------------------------------------

def test_message_show_reports_state_and_attempts(engine_home: Path) -> None:
    """show --json has the message's shard, state, times, generation and attempts."""
    mid = uid("show")
    deliver_at = days_ahead(200, plus_ms=25_689_123)  # 07:08:09.123
    queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--deliver-at",
                        deliver_at, "--id", mid, "--key", "k", "--header", "h=v", "--wait",
                        home=engine_home)
    assert queued.code == 0, queued.stderr
    result = run_nereus("--json", "message", "show", mid, home=engine_home)
    assert result.code == 0, result.stderr
    data = one_json(result)
    for key in ("delay_message_id", "shard", "state", "deliver_at", "generation", "attempts"):
        assert key in data, key
    assert data["delay_message_id"] == mid
    assert data["shard"] == f"default/{partition_for(mid, 2)}"
    assert data["state"] == "SCHEDULED"
    assert data["deliver_at"] == deliver_at
    assert data["generation"] == 1
    assert data["attempts"] == []
    assert data["key"] == "k" and data["headers"] == {"h": "v"}


def test_message_show_lists_each_attempt(engine_home: Path) -> None:
    """A published message's attempts each carry an attempt_id and a state."""
    mid = uid("attempted")
    run_nereus("message", "schedule", "--lane", "local", "--delay", "50ms", "--id", mid,
               "--wait", home=engine_home)

    def published() -> dict[str, Any] | None:
        data: dict[str, Any] = run_nereus("--json", "message", "show", mid,
                                          home=engine_home).json()
        return data if data["state"] == "PUBLISHED" else None

    data = wait_until(f"{mid} to be published", published, 15)
    assert len(data["attempts"]) >= 1
    for attempt in data["attempts"]:
        assert attempt["attempt_id"] and attempt["state"]
    assert data["attempts"][-1]["state"] == "PUBLISHED"


def test_message_show_barrier_is_conclusive(engine_home: Path) -> None:
    """show --barrier appends a query barrier first, so the answer is marked conclusive."""
    mid = uid("barrier")
    queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                        "--id", mid, home=engine_home)
    assert queued.code == 0 and queued.json()["evidence"] == "QUEUED", queued.stderr
    result = run_nereus("--json", "message", "show", mid, "--barrier", home=engine_home)
    assert result.code == 0, result.stderr
    data = one_json(result)
    assert data["state"] == "SCHEDULED"
    assert data["conclusive"] is True
    assert data["barrier_position"] > queued.json()["source_position"]
    assert data["applied_position"] >= data["barrier_position"]


def test_message_show_unknown_id_exits_3(engine_home: Path) -> None:
    """show of an id the engine does not know exits 3 (also with --barrier), its hint
    (carried from the engine) naming why a message can be missing."""
    for extra in ([], ["--barrier"]):
        result = run_nereus("--json", "message", "show", uid("nobody"), *extra,
                            home=engine_home)
        assert result.code == 3, (extra, result.stderr)
        error = one_json(result)
        assert error["exit_code"] == 3
        assert "retention" in error["hint"]
        assert "no message" in error["error"] and result.stderr == ""


# publishing --------------------------------------------------------------------------------

def test_due_messages_are_published_to_the_outbox(engine_home: Path, tmp_path: Path) -> None:
    """Messages due in ~1 s land in outbox/local.jsonl with their fields, not early."""
    outbox = engine_home / "outbox" / "local.jsonl"
    prefix = uid("pub")
    deliver_at = (datetime.now(UTC) + timedelta(seconds=1)).isoformat(timespec="milliseconds")
    single = run_nereus("--json", "message", "schedule", "--lane", "local", "--deliver-at",
                        deliver_at, "--id", f"{prefix}-0", "--key", "k0", "--header", "n=0",
                        "--payload", "zero", home=engine_home)
    assert single.code == 0, single.stderr
    lines = [{"id": f"{prefix}-{n}", "lane": "local", "delay": "1s", "key": f"k{n}",
              "headers": {"n": str(n)}, "payload": json.dumps({"n": n})} for n in range(1, 4)]
    batch = run_nereus("--json", "message", "schedule", "--batch",
                       str(write_batch(tmp_path / "due.jsonl", list(lines))),
                       home=engine_home)
    assert batch.code == 0, batch.stderr
    wanted = {f"{prefix}-{n}" for n in range(4)}

    def all_published() -> dict[str, dict[str, Any]] | None:
        seen = {line["delay_message_id"]: line for line in read_outbox(outbox)
                if line["delay_message_id"] in wanted}
        return seen if seen.keys() == wanted else None

    published = wait_until("the due messages in the outbox", all_published, 15)
    for n in range(4):
        line = published[f"{prefix}-{n}"]
        for key in ("delay_message_id", "attempt_id", "deliver_at", "published_at", "key",
                    "headers", "payload"):
            assert key in line, key
        assert line["key"] == f"k{n}"
        assert line["headers"] == {"n": str(n)}
        assert line["attempt_id"]
        assert utc(line["published_at"]) >= utc(line["deliver_at"]), line
    assert published[f"{prefix}-0"]["payload"] == "zero"
    assert utc(published[f"{prefix}-0"]["deliver_at"]) == datetime.fromisoformat(deliver_at)
    assert json.loads(published[f"{prefix}-2"]["payload"]) == {"n": 2}
    shown = run_nereus("--json", "message", "show", f"{prefix}-1", home=engine_home).json()
    assert shown["state"] == "PUBLISHED"
    assert shown["attempts"][-1]["attempt_id"] == published[f"{prefix}-1"]["attempt_id"]


# lists -----------------------------------------------------------------------------------

def test_message_list_with_the_engine_running(engine_home: Path) -> None:
    """message list --json gives messages with id, shard, lane, state; filters apply."""
    mid = uid("listed")
    run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--id", mid,
               "--wait", home=engine_home)
    result = run_nereus("--json", "message", "list", "--limit", "100000", home=engine_home)
    assert result.code == 0, result.stderr
    messages = one_json(result)["messages"]
    ours = [m for m in messages if m["delay_message_id"] == mid]
    assert len(ours) == 1
    assert ours[0]["state"] == "SCHEDULED" and ours[0]["lane"] == "local"
    assert ours[0]["shard"] == f"default/{partition_for(mid, 2)}"
    one = run_nereus("--json", "message", "list", "--limit", "1", home=engine_home)
    assert len(one.json()["messages"]) == 1
    shard = ours[0]["shard"]
    only = run_nereus("--json", "message", "list", "--shard", shard, "--state", "scheduled",
                      "--limit", "100000", home=engine_home).json()["messages"]
    assert only and all(m["shard"] == shard and m["state"] == "SCHEDULED" for m in only)


def _pages(home: Path, *flags: str) -> tuple[list[str], int]:
    """Every page of ``message list FLAGS`` followed by its next_cursor: the ids in the
    order listed, and how many pages it took."""
    ids: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        after = () if cursor is None else ("--after", cursor)
        result = run_nereus("--json", "message", "list", *flags, *after, home=home)
        assert result.code == 0, result.stderr
        page = one_json(result)
        pages += 1
        ids += [m["delay_message_id"] for m in page["messages"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids, pages
        assert pages < 1000, "next_cursor never ran out"


def test_message_list_pages_with_a_cursor(engine_home: Path, tmp_path: Path) -> None:
    """message list --limit N pages: following next_cursor with --after lists every message
    exactly once across the pages, across both shards, with and without filters; the human
    output names the next page; a cursor that is not one exits 2."""
    prefix = uid("paged")
    lines: list[dict[str, Any] | str] = [
        {"id": f"{prefix}-{n:02d}", "lane": "local", "delay": "2h", "payload": "x"}
        for n in range(23)]
    batch = run_nereus("--json", "message", "schedule", "--batch",
                       str(write_batch(tmp_path / "paged.jsonl", lines)), "--wait",
                       home=engine_home)
    assert batch.code == 0, batch.stderr
    cancelled = f"{prefix}-05"
    assert run_nereus("message", "cancel", cancelled, "--wait", home=engine_home).code == 0
    ours = {f"{prefix}-{n:02d}" for n in range(23)}

    everything = run_nereus("--json", "message", "list", "--limit", "100000",
                            home=engine_home).json()["messages"]
    assert ours <= {m["delay_message_id"] for m in everything}
    paged, pages = _pages(engine_home, "--limit", "4")
    assert len(paged) == len(set(paged)), "a message was listed twice"
    assert set(paged) == {m["delay_message_id"] for m in everything}
    assert pages >= len(paged) // 4
    assert [m["delay_message_id"] for m in everything] == paged  # one order: shard, then id

    scheduled, _ = _pages(engine_home, "--state", "scheduled", "--lane", "local", "--limit",
                          "3")
    assert len(scheduled) == len(set(scheduled))
    assert ours - {cancelled} <= set(scheduled) and cancelled not in scheduled
    gone, _ = _pages(engine_home, "--state", "cancelled", "--limit", "2")
    assert cancelled in gone and not (ours - {cancelled}) & set(gone)
    for shard in SHARDS:
        one_shard, _ = _pages(engine_home, "--shard", shard, "--limit", "5")
        assert one_shard == [m["delay_message_id"] for m in everything if m["shard"] == shard]

    human = run_nereus("message", "list", "--limit", "2", home=engine_home)
    assert human.code == 0 and "nereus message list --limit 2 --after " in human.stdout
    bad = run_nereus("--json", "message", "list", "--after", "not-a-cursor", home=engine_home)
    assert bad.code == 2, bad.stdout + bad.stderr


def test_lane_list_with_the_engine_running(engine_home: Path) -> None:
    """lane list --json is a list of lanes with gate, readiness and due backlog."""
    result = run_nereus("--json", "lane", "list", home=engine_home)
    assert result.code == 0, result.stderr
    lanes = one_json(result)
    assert isinstance(lanes, list)
    assert [lane["lane"] for lane in lanes] == ["local"]
    for lane in lanes:
        assert lane["gate"] in ("OPEN", "CLOSED")
        assert lane["readiness"] in ("READY", "NOT_READY")
        assert isinstance(lane["due_backlog"], int) and lane["due_backlog"] >= 0
    assert lanes[0]["gate"] == "OPEN" and lanes[0]["readiness"] == "READY"


def test_attempt_list_with_the_engine_running(engine_home: Path) -> None:
    """attempt list --json is a list of open attempts; a bad --state exits 2."""
    result = run_nereus("--json", "attempt", "list", home=engine_home)
    assert result.code == 0, result.stderr
    attempts = one_json(result)
    assert isinstance(attempts, list)
    for attempt in attempts:
        assert attempt["attempt_id"] and attempt["state"] in ("PUBLISHING", "UNKNOWN")
    for state in ("publishing", "unknown"):
        assert run_nereus("--json", "attempt", "list", "--state", state,
                          home=engine_home).code == 0
    assert run_nereus("attempt", "list", "--state", "done", home=engine_home).code == 2


def test_shard_list_with_the_engine_running(engine_home: Path) -> None:
    """shard list --json through the engine: every shard ACTIVE with positions and lag."""
    result = run_nereus("--json", "shard", "list", home=engine_home)
    assert result.code == 0, result.stderr
    shards = one_json(result)
    assert [s["shard"] for s in shards] == SHARDS
    for s in shards:
        assert s["state"] == "ACTIVE"
        assert isinstance(s["log_end_position"], int) and isinstance(s["lag"], int)


def test_shard_list_with_the_engine_stopped(home: Path) -> None:
    """shard list works offline: STOPPED shards with the positions the engine left."""
    never = run_nereus("--json", "shard", "list", home=home)
    assert never.code == 0, never.stderr
    assert [s["shard"] for s in never.json()] == SHARDS
    with running_engine(home):
        run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--wait",
                   home=home)
        live = {s["shard"]: s for s in run_nereus("--json", "shard", "list", home=home).json()}
    result = run_nereus("--json", "shard", "list", home=home)
    assert result.code == 0, result.stderr
    for s in one_json(result):
        assert s["state"] == "STOPPED"
        assert s["applied_position"] is not None
        assert s["log_end_position"] >= live[s["shard"]]["log_end_position"]
        assert s["lag"] == 0
