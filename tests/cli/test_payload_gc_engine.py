"""The engine collects large payloads itself (``[engine] payload_gc_interval``,
``engine/process/payload_collector.py``), run as an operator would: a published message's object
goes once retention swept its stage, with no ``nereus payload gc``; an object a Recovery
Set member references stays, though its message was swept too."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.cli.engine_homes import one_json
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.integration.large_payload_homes import (
    collect_quickly,
    payload_file,
    payload_objects,
    reserve_directly,
    small_inline_home,
)
from tests.polling import wait_until


def _home(tmp_path: Path) -> Path:
    """One shard, a tiny inline limit, retention 1 s on lane ``local``, gc every second."""
    home = small_inline_home(tmp_path, partitions=1)
    collect_quickly(home / "nereus.toml")
    return home


def _schedule(home: Path, path: Path, message_id: str, delay: str) -> None:
    result = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", delay,
                        "--id", message_id, "--payload-file", str(path), "--wait", home=home,
                        timeout=60)
    assert result.code == 0, result.stdout + result.stderr
    document: dict[str, Any] = one_json(result)
    assert document["result"] == "APPLIED", document


def test_the_engine_collects_a_swept_messages_payload_but_not_a_recovery_set_members(
        tmp_path: Path) -> None:
    """``kept`` (due in 1 h) is in a checkpoint, then cancelled; ``sent`` is due in 1 s and
    published. Both are swept after their 1 s retention; the engine's collector then
    deletes ``sent``'s object by itself and keeps ``kept``'s (in the Recovery Floor), and
    ``engine status`` lists its ``payload-gc`` worker RUNNING."""
    home = _home(tmp_path)
    with running_engine(home):
        _schedule(home, payload_file(tmp_path, name="kept.bin"), "kept", "1h")
        first = payload_objects(home)
        assert len(first) == 1, first
        made = run_nereus("--json", "checkpoint", "create", "default/0", home=home,
                          timeout=120)
        assert made.code == 0, made.stdout + made.stderr
        cancelled = run_nereus("--json", "message", "cancel", "kept", "--wait", home=home)
        assert cancelled.code == 0, cancelled.stdout + cancelled.stderr
        _schedule(home, payload_file(tmp_path, size=12_000, name="sent.bin"), "sent", "1s")
        sent_object = (payload_objects(home) - first).pop()

        def swept_and_collected() -> bool:
            gone = all(run_nereus("--json", "message", "show", m, home=home).code != 0
                       for m in ("kept", "sent"))
            return gone and sent_object not in payload_objects(home)

        wait_until("both messages swept and the published one's object collected",
                   swept_and_collected, 60, interval_s=0.3)
        assert payload_objects(home) == first  # in the Recovery Floor: kept
        status = run_nereus("--json", "engine", "status", home=home)
        assert status.code == 0, status.stderr
        workers = {w["name"]: w for w in json.loads(status.stdout)["workers"]}
        assert workers["payload-gc"]["state"] == "RUNNING", workers.get("payload-gc")
    dry = run_nereus("--json", "payload", "gc", "--dry-run", home=home)
    assert dry.code == 0, dry.stderr
    kept = json.loads(dry.stdout)["kept"]
    assert [item["reason"] for item in kept] == ["in the Recovery Floor of default/0"], kept
    log = (home / "log" / "engine.log").read_text()
    assert '"payload_gc"' in log, log[-2000:]


def _stages(home: Path) -> list[dict[str, Any]]:
    """The payload stages in default/0's live state (read beside the engine)."""
    dumped = run_nereus("--json", "shard", "dump", "default/0", "--cf", "payload", home=home)
    assert dumped.code == 0, dumped.stdout + dumped.stderr
    entries: list[dict[str, Any]] = json.loads(dumped.stdout)["entries"]
    return entries


def test_an_abandoned_reservation_leaves_neither_a_stage_nor_an_object(
        tmp_path: Path) -> None:
    """A client reserved a payload, uploaded it and died before its commit; the route's
    dedup window is 1 s. Once the reservation expired and the window passed, the engine's
    own sweep removes the stage from the shard's state and its collector the object, with
    no operator command."""
    home = _home(tmp_path)
    config = home / "nereus.toml"
    config.write_text(config.read_text().replace(
        "partitions = 1\n", 'partitions = 1\ndedup_window = "1s"\n', 1))
    with running_engine(home):  # which replicates the window before the reservation
        expires = int(time.time() * 1000) + 5_000  # the stage is seen before it goes
        key = reserve_directly(home, delay_message_id="abandoned", expires_at_ms=expires,
                               data=b"half a payload" * 100, partitions=1)
        wait_until("the reservation applied", lambda: _stages(home), 30)
        wait_until("the stage swept and the object collected",
                   lambda: not _stages(home) and key not in payload_objects(home), 60,
                   interval_s=0.3)


def test_a_stage_kept_with_no_window_goes_once_a_window_is_given_back(
        tmp_path: Path) -> None:
    """The route's ``dedup_window = "0s"`` (results and stages kept for ever): an abandoned
    reservation's stage has no ``retain`` entry. With ``dedup_window = "1s"`` and the engine
    started again, its SHARD_RETENTION catches the stage up (a RETAIN_BACKFILL names it)
    and a SWEEP removes it, with no operator command; the object goes too."""
    home = _home(tmp_path)
    config = home / "nereus.toml"
    original = config.read_text()
    config.write_text(original.replace("partitions = 1\n",
                                       'partitions = 1\ndedup_window = "0s"\n', 1))
    with running_engine(home):
        expires = int(time.time() * 1000) + 1_000
        key = reserve_directly(home, delay_message_id="abandoned", expires_at_ms=expires,
                               data=b"half a payload" * 100, partitions=1)
        wait_until("the reservation applied", lambda: _stages(home), 30)
    retain = run_nereus("--json", "shard", "dump", "default/0", "--cf", "retain", home=home)
    assert retain.code == 0, retain.stderr
    kinds = [entry["key"]["kind"] for entry in json.loads(retain.stdout)["entries"]]
    assert "p" not in kinds, kinds
    config.write_text(original.replace("partitions = 1\n",
                                       'partitions = 1\ndedup_window = "1s"\n', 1))
    with running_engine(home):
        wait_until("the stage caught up and swept, and the object collected",
                   lambda: not _stages(home) and key not in payload_objects(home), 60,
                   interval_s=0.3)
    log = run_nereus("--json", "shard", "log", "default/0", home=home)
    assert log.code == 0, log.stderr
    kinds = [json.loads(line)["kind"] for line in log.stdout.splitlines()]
    assert kinds.count("SHARD_RETENTION") == 2 and "RETAIN_BACKFILL" in kinds, kinds


def test_a_bad_interval_is_refused_naming_the_key(tmp_path: Path) -> None:
    """``payload_gc_interval = "soon"``: the engine does not start; exit 2 naming the file,
    line, table and key."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    config = home / "nereus.toml"
    config.write_text(config.read_text() + '\n[engine]\npayload_gc_interval = "soon"\n')
    line = len(config.read_text().splitlines())
    started = run_nereus("--json", "engine", "start", home=home, timeout=60)
    assert started.code == 2, started.stdout + started.stderr
    error = json.loads(started.stdout)["error"]
    assert f"nereus.toml:{line}" in error and "[engine] payload_gc_interval" in error, error
