"""The large-payload path through the CLI: RESERVE -> upload -> attest -> COMMIT ->
SCHEDULE(payload_ref), and the engine publishing the full payload. Materialisation at Claim
is ``test_large_payload_claims.py``; ``nereus payload gc`` is ``test_payload_gc.py``."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest

from nereus import records as r
from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from tests.conftest import run_nereus
from tests.daemon import read_outbox, running_engine
from tests.integration.large_payload_homes import (
    INLINE_LIMIT,
    log_lines,
    payload_file,
    schedule_file,
    small_inline_home,
)
from tests.polling import wait_until


def test_a_payload_file_above_the_inline_limit_goes_through_the_object_store(
    tmp_path: Path,
) -> None:
    """RESERVE, COMMIT and SCHEDULE(payload_ref) land in order on the message's shard, and
    the object holds the file's exact bytes under payloads/<route>/<partition>/<id>."""
    home = small_inline_home(tmp_path)
    path = payload_file(tmp_path)
    result = schedule_file(home, path, "--id", "big-1")
    assert result.code == 0, result.stderr
    receipt = result.json()
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert receipt["kind"] == "SCHEDULE" and receipt["delay_message_id"] == "big-1"
    assert receipt["payload_bytes"] == 10_000 and receipt["payload_sha256"] == sha
    shard = receipt["shard"]
    route, partition = shard.split("/")
    assert receipt["payload_object"] == f"payloads/{route}/{partition}/{receipt['payload_id']}"
    assert [s["kind"] for s in receipt["payload_stages"]] == ["PAYLOAD_RESERVE", "PAYLOAD_COMMIT"]
    assert {s["shard"] for s in receipt["payload_stages"]} == {shard}

    lines = log_lines(home, shard)
    assert [line["kind"] for line in lines] == ["PAYLOAD_RESERVE", "PAYLOAD_COMMIT", "SCHEDULE"]
    assert [line["position"] for line in lines] == sorted(line["position"] for line in lines)
    assert lines[2]["position"] == receipt["source_position"]
    assert all(line["ids"].get("payload_id") == receipt["payload_id"] for line in lines[:2])
    assert receipt["payload_id"] in lines[2]["summary"]

    stored = home / "objects" / receipt["payload_object"]
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == sha


def test_the_schedule_record_carries_a_reference_not_the_bytes(tmp_path: Path) -> None:
    """The SCHEDULE in the Shard Log has an empty inline payload and payload_ref set."""
    home = small_inline_home(tmp_path, partitions=1)
    receipt = schedule_file(home, payload_file(tmp_path)).json()
    log = FileShardLog(home / "shardlog" / "default" / "0", create=False)
    try:
        identity, *records = [r.decode(item.payload) for item in log.read(0, 10)]
    finally:
        log.close()
    assert isinstance(identity, r.RouteIdentity)
    reserve, commit, sched = records
    assert isinstance(reserve, r.PayloadReserve) and isinstance(commit, r.PayloadCommit)
    assert isinstance(sched, r.Schedule)
    assert sched.payload == b"" and sched.payload_ref == receipt["payload_id"]
    assert reserve.size_bytes == commit.size_bytes == 10_000
    assert commit.object_key == receipt["payload_object"]
    now = time.time_ns() // 1_000_000
    assert now + 3_000_000 < reserve.expires_at_ms <= now + 3_600_000


def test_at_or_below_the_inline_limit_the_payload_stays_inline(tmp_path: Path) -> None:
    """A file that fits the inline limit is one SCHEDULE, and nothing is uploaded."""
    home = small_inline_home(tmp_path, partitions=1)
    result = schedule_file(home, payload_file(tmp_path, INLINE_LIMIT))
    assert result.code == 0, result.stderr
    assert "payload_id" not in result.json()
    assert [line["kind"] for line in log_lines(home, "default/0")] == ["SCHEDULE"]
    assert not (home / "objects" / "payloads").exists()


def test_above_the_large_payload_limit_is_a_usage_error(tmp_path: Path) -> None:
    """Above [shard] max_payload_bytes the CLI refuses (exit 2) and queues nothing."""
    home = small_inline_home(tmp_path, partitions=1)
    config = home / "nereus.toml"
    config.write_text(config.read_text() + "max_payload_bytes = 5000\n")
    result = schedule_file(home, payload_file(tmp_path, 6_000))
    assert result.code == 2
    assert "max_payload_bytes" in result.stdout
    assert not (home / "shardlog" / "default" / "0").exists() or not log_lines(home, "default/0")


def test_with_the_engine_each_stage_waits_for_its_applied_result(tmp_path: Path) -> None:
    """With --wait every stage is APPLIED before the next one is queued."""
    home = small_inline_home(tmp_path, partitions=1)
    path = payload_file(tmp_path)
    with running_engine(home):
        result = schedule_file(home, path, "--wait")
        assert result.code == 0, result.stderr
        receipt = result.json()
        assert receipt["result"] == "APPLIED"
        assert [(s["kind"], s["result"]) for s in receipt["payload_stages"]] == [
            ("PAYLOAD_RESERVE", "APPLIED"), ("PAYLOAD_COMMIT", "APPLIED")]


def run_in_process(home: Path, *args: str) -> int:
    """``nereus`` in this process (so a test can patch it); returns the exit status."""
    from nereus.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["--home", str(home), *args])
    return int(exited.value.code or 0)


def test_a_failed_attestation_stops_before_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """If the stored object is not the reserved bytes, exit 1 and queue no COMMIT/SCHEDULE."""
    from nereus.adapters.backends.objectstore.protocol import ObjectInfo

    home = small_inline_home(tmp_path, partitions=1)
    path = payload_file(tmp_path)
    monkeypatch.setattr(LocalObjectStore, "head",
                        lambda self, key: ObjectInfo(key, 10_000, "0" * 64))
    code = run_in_process(home, "message", "schedule", "--lane", "local", "--delay", "1h",
                          "--payload-file", str(path))
    assert code == 1
    err = capsys.readouterr().err
    assert "attestation" in err and "PAYLOAD_COMMIT was not queued" in err
    assert [line["kind"] for line in log_lines(home, "default/0")] == ["PAYLOAD_RESERVE"]


def test_a_rejected_stage_stops_the_flow_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A REJECTED PAYLOAD_RESERVE (as --wait would report it) ends the run with exit 1
    before anything is uploaded."""
    import msgspec

    from nereus.cli.context import Env
    from nereus.client import Receipt

    home = small_inline_home(tmp_path, partitions=1)
    real = Env.command_sink

    class Rejecting:
        """The home's sink, but the shard answers PAYLOAD_RESERVE with REJECTED."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def submit(self, prepared: list[Any], *, wait: bool) -> list[Receipt]:
            return [msgspec.structs.replace(r, evidence="APPLIED", result="REJECTED",
                                            reason="PAYLOAD_EXISTS", detail="taken")
                    if r.kind == "PAYLOAD_RESERVE" else r
                    for r in self.inner.submit(prepared, wait=False)]

    monkeypatch.setattr(Env, "command_sink",
                        lambda env, *, wait: Rejecting(real(env, wait=False)))
    code = run_in_process(home, "message", "schedule", "--lane", "local", "--delay", "1h",
                          "--payload-file", str(payload_file(tmp_path)))
    assert code == 1
    err = capsys.readouterr().err
    assert "PAYLOAD_RESERVE" in err and "REJECTED" in err and "PAYLOAD_EXISTS" in err
    assert not (home / "objects" / "payloads").exists()


def test_the_engine_publishes_the_full_payload(tmp_path: Path) -> None:
    """End to end: the outbox line carries the file's bytes, materialised at Claim."""
    import base64

    home = small_inline_home(tmp_path, partitions=1)
    path = payload_file(tmp_path)
    result = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1s",
                        "--payload-file", str(path), "--id", "big-e2e", home=home)
    assert result.code == 0, result.stderr
    with running_engine(home):
        lines = wait_until("the large payload to publish",
                           lambda: read_outbox(home / "outbox" / "local.jsonl"), 30)
    line = lines[0]
    assert line["delay_message_id"] == "big-e2e"
    data = (base64.b64decode(line["payload"]) if line.get("payload_encoding") == "base64"
            else line["payload"].encode())
    assert data == path.read_bytes()
