"""Retention, run as an operator would: ``retention`` and ``dedup_window`` in
``[lanes.NAME]``, replicated by the engine (LANE_LIMITS); published messages are removed
by the engine's SWEEP records once their retention has passed, and replaying the Shard
Log from empty gives the live database's digest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.engine_homes import one_json
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.polling import wait_until

MESSAGES = ("r1", "r2", "r3")


LANE = 'destination = "file"\n'  # a line of a fresh home's lane table
ROUTE = "partitions = 1\n"  # a line of its route table


def _init(home: Path) -> str:
    """A fresh home (``nereus init``); its ``nereus.toml`` as written."""
    assert run_nereus("init", home=home).code == 0
    return (home / "nereus.toml").read_text()


def _configure(home: Path, original: str, anchor: str, lines: str) -> None:
    """``nereus.toml`` as ``original``, with ``lines`` after the line ``anchor``."""
    assert anchor in original
    (home / "nereus.toml").write_text(original.replace(anchor, anchor + lines, 1))


def _home(path: Path) -> Path:
    _configure(path, _init(path), LANE, 'retention = "2s"\ndedup_window = "2s"\n')
    return path


def _state(home: Path, message_id: str) -> str | None:
    """The message's state, or None once ``message show`` no longer finds it."""
    shown = run_nereus("--json", "message", "show", message_id, home=home)
    if shown.code != 0:
        assert "not found" in (shown.stdout + shown.stderr).lower() or \
            "no message" in (shown.stdout + shown.stderr).lower(), shown.stdout + shown.stderr
        return None
    document: dict[str, Any] = json.loads(shown.stdout)
    state: str = document["message"]["state"] if "message" in document else document["state"]
    return state


def _kinds(home: Path) -> list[str]:
    """The kinds of shard default/0's records, in log order."""
    log = run_nereus("--json", "shard", "log", "default/0", home=home)
    assert log.code == 0, log.stderr
    return [json.loads(line)["kind"] for line in log.stdout.splitlines()]


def _assert_replay_matches(home: Path) -> None:
    """``shard replay --empty --compare live`` gives the live digest."""
    replay = run_nereus("--json", "shard", "replay", "default/0", "--empty", "--compare", "live",
                        home=home, timeout=120)
    assert replay.code == 0, replay.stdout + replay.stderr
    compared = json.loads(replay.stdout)
    assert compared["match"] is True, compared


def test_published_messages_go_after_their_retention_and_replay_agrees(tmp_path: Path) -> None:
    """retention 2s: three messages due in 1 s are PUBLISHED, then gone from ``message
    show`` and ``message list``; the log holds the engine's SWEEP records, and ``shard
    replay --empty --compare live`` matches the live digest."""
    home = _home(tmp_path / "home")
    with running_engine(home):
        for message_id in MESSAGES:
            result = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay",
                                "1s", "--id", message_id, "--wait", home=home)
            assert result.code == 0, result.stderr
            assert one_json(result)["result"] == "APPLIED"
        seen: set[str] = set()

        def published_then_gone() -> bool:
            for message_id in MESSAGES:
                state = _state(home, message_id)
                if state == "PUBLISHED":
                    seen.add(message_id)
                elif state is not None:
                    return False
            return all(_state(home, m) is None for m in MESSAGES)

        wait_until("the messages published, then swept", published_then_gone, 60, interval_s=0.2)
        assert seen, "no message was ever seen PUBLISHED"  # each was, unless swept between looks
        listed = run_nereus("--json", "message", "list", home=home)
        assert listed.code == 0, listed.stderr
        assert not any(m in listed.stdout for m in MESSAGES), listed.stdout
    kinds = _kinds(home)
    assert "SWEEP" in kinds and "LANE_LIMITS" in kinds, kinds
    _assert_replay_matches(home)
    digest = run_nereus("--json", "shard", "digest", "default/0", home=home)
    assert digest.code == 0, digest.stderr


def test_messages_that_ended_before_the_first_retention_are_caught_up(tmp_path: Path) -> None:
    """``old`` is scheduled and cancelled with no engine running (queued in the file log):
    the engine applies both before its first LANE_LIMITS gives the lane a retention, so
    ``old`` has no retain entry of its own. The engine's RETAIN_BACKFILL names it, a SWEEP
    removes it 1 s after the retention was replicated, and replay agrees."""
    home = tmp_path / "home"
    _configure(home, _init(home), LANE, 'retention = "1s"\ndedup_window = "1s"\n')
    queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                        "--id", "old", home=home)
    assert queued.code == 0, queued.stdout + queued.stderr
    cancelled = run_nereus("--json", "message", "cancel", "old", home=home)
    assert cancelled.code == 0, cancelled.stdout + cancelled.stderr
    with running_engine(home):
        wait_until("the message cancelled before retention existed, caught up and swept",
                   lambda: _state(home, "old") is None, 60, interval_s=0.2)
    kinds = _kinds(home)
    assert kinds.index("CANCEL") < kinds.index("LANE_LIMITS") < kinds.index("RETAIN_BACKFILL")
    _assert_replay_matches(home)


def test_messages_that_ended_while_retention_was_0_go_once_it_is_given_back(
        tmp_path: Path) -> None:
    """``retention = "0s"`` (kept): ``kept`` is scheduled and cancelled under a running
    engine and stays. With ``retention = "1s"`` configured and the engine started again,
    its LANE_LIMITS gives the retention back, a RETAIN_BACKFILL names ``kept`` and a SWEEP
    removes it; replay from empty agrees."""
    home = tmp_path / "home"
    original = _init(home)
    _configure(home, original, LANE, 'retention = "0s"\n')
    with running_engine(home):
        for verb in (("schedule", "--lane", "local", "--delay", "1h", "--id", "kept"),
                     ("cancel", "kept")):
            done = run_nereus("--json", "message", *verb, "--wait", home=home)
            assert done.code == 0, done.stdout + done.stderr
        assert _state(home, "kept") == "CANCELLED"
    _configure(home, original, LANE, 'retention = "1s"\ndedup_window = "1s"\n')
    with running_engine(home):
        wait_until("the message cancelled while retention was 0, caught up and swept",
                   lambda: _state(home, "kept") is None, 60, interval_s=0.2)
    kinds = _kinds(home)
    assert kinds.count("LANE_LIMITS") == 2
    def last(kind: str) -> int:
        return len(kinds) - 1 - kinds[::-1].index(kind)

    # (a fresh shard's first window catches up the results written before it: an earlier
    # RETAIN_BACKFILL names its activation's and its lane limits')
    assert kinds.index("CANCEL") < last("LANE_LIMITS") < last("RETAIN_BACKFILL")
    _assert_replay_matches(home)


def _held(home: Path, family: str) -> list[dict[str, Any]]:
    """The entries of one family of default/0's live state (read beside the engine)."""
    dumped = run_nereus("--json", "shard", "dump", "default/0", "--cf", family, home=home)
    assert dumped.code == 0, dumped.stdout + dumped.stderr
    entries: list[dict[str, Any]] = json.loads(dumped.stdout)["entries"]
    return entries


def test_results_and_rejects_kept_with_no_window_go_once_a_window_is_given_back(
        tmp_path: Path) -> None:
    """The route's ``dedup_window = "0s"`` (kept): a query barrier's result and a garbage
    record's reject, appended beside a running engine, get no ``retain`` entry. With
    ``dedup_window = "1s"`` and the engine started again, its SHARD_RETENTION catches both
    up (a RETAIN_BACKFILL names them) and a SWEEP removes them, with no operator command;
    replay from empty agrees."""
    from nereus.adapters.backends.shardlog.file_log import FileShardLog
    from nereus.records import QueryBarrier, encode

    home = tmp_path / "home"
    original = _init(home)
    _configure(home, original, ROUTE, 'dedup_window = "0s"\n')

    def query_result() -> list[dict[str, Any]]:
        return [e for e in _held(home, "result") if "kept-query" in json.dumps(e["key"])]

    with running_engine(home):
        log = FileShardLog(home / "shardlog" / "default" / "0", create=False)
        log.append([encode(QueryBarrier(command_id="kept-query")), b"not a record"])
        log.close()
        wait_until("the query barrier and the garbage record applied",
                   lambda: query_result() and _held(home, "reject"), 30)
    kinds = [entry["key"]["kind"] for entry in _held(home, "retain")]
    assert "r" not in kinds and "j" not in kinds, kinds
    _configure(home, original, ROUTE, 'dedup_window = "1s"\n')
    with running_engine(home):
        wait_until("the result and the reject caught up and swept",
                   lambda: not query_result() and not _held(home, "reject"), 60, interval_s=0.3)
    kinds = _kinds(home)
    assert kinds.count("SHARD_RETENTION") == 2 and "RETAIN_BACKFILL" in kinds, kinds
    _assert_replay_matches(home)
