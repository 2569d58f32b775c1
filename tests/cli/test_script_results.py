"""Results a script can trust: idempotent retries, ``command show`` at any later time,
``--wait`` that exits 6 when it cannot return the applied result, batches of any size in
chunks, an interrupted batch that says what was acknowledged and how to retry safely,
and the server's own words when it refuses a request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nereus.client import RouteRef
from nereus.errors import ExitCode
from nereus.shard import ShardId
from tests.cli.engine_homes import write_batch
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.homelog import home_log
from tests.polling import days_ahead, wait_until

WHEN = days_ahead(300)


def _schedule(home: Path, *args: str) -> Any:
    return run_nereus("--json", "message", "schedule", "--lane", "local", "--deliver-at", WHEN,
                      *args, home=home)


def test_an_identical_retry_returns_the_first_result_and_a_conflict_is_rejected(
        engine_home: Path) -> None:
    """The same schedule twice is one command (exit 0, duplicate_of the first); the same id with
    other content is still REJECTED MESSAGE_EXISTS."""
    first = _schedule(engine_home, "--id", "retry-1", "--payload", "p", "--header", "a=b",
                      "--wait")
    assert first.code == 0, first.stderr
    again = _schedule(engine_home, "--id", "retry-1", "--payload", "p", "--header", "a=b",
                      "--wait")
    assert again.code == 0, again.stdout + again.stderr
    one, two = first.json(), again.json()
    assert one["result"] == two["result"] == "APPLIED"
    assert two["command_id"] == one["command_id"]
    assert two["duplicate_of"] == one["source_position"]
    other = _schedule(engine_home, "--id", "retry-1", "--payload", "different", "--wait")
    assert other.code == ExitCode.NO
    assert other.json()["result"] == "REJECTED"
    assert other.json()["reason"] == "MESSAGE_EXISTS"


def test_a_cancel_retried_under_its_command_id_is_applied_once(engine_home: Path) -> None:
    """A cancel retried under its --command-id answers with the first result, exit 0."""
    assert _schedule(engine_home, "--id", "retry-2", "--wait").code == 0
    args = ("--json", "message", "cancel", "retry-2", "--command-id", "cancel-retry-2", "--wait")
    first = run_nereus(*args, home=engine_home)
    again = run_nereus(*args, home=engine_home)
    assert (first.code, again.code) == (0, 0), again.stdout
    assert again.json()["duplicate_of"] == first.json()["source_position"]


def test_command_show_tells_the_result_later_with_or_without_the_engine(home: Path) -> None:
    """command show: QUEUED (exit 6) with no engine, APPLIED or REJECTED once applied, exit 3
    for an unknown id."""
    queued = _schedule(home, "--id", "later-1")
    assert queued.code == 0
    command_id = queued.json()["command_id"]
    offline = run_nereus("--json", "command", "show", command_id, home=home)
    assert offline.code == ExitCode.RESULT_NOT_KNOWN
    assert offline.json()["evidence"] == "QUEUED"
    assert offline.json()["source_position"] == queued.json()["source_position"]
    with running_engine(home):
        shown = wait_until("the command applied",
                           lambda: ((r := run_nereus("--json", "command", "show", command_id,
                                                     home=home)).code == 0 and r) or None, 30)
        assert shown.json()["evidence"] == "APPLIED"
        assert shown.json()["result"] == "APPLIED"
        assert shown.json()["delay_message_id"] == "later-1"
        rejected = _schedule(home, "--id", "later-1", "--payload", "other")
        rejected_id = rejected.json()["command_id"]
        verdict = wait_until("the conflicting schedule applied",
                             lambda: ((r := run_nereus("--json", "command", "show", rejected_id,
                                                       home=home)).code != 6 and r) or None, 30)
        assert verdict.code == ExitCode.NO
        assert verdict.json()["reason"] == "MESSAGE_EXISTS"
    after = run_nereus("--json", "command", "show", command_id, home=home)
    assert after.code == 0 and after.json()["result"] == "APPLIED"
    missing = run_nereus("--json", "command", "show", "no-such-command", home=home)
    assert missing.code == ExitCode.NOT_FOUND


def test_wait_on_a_shard_that_applies_nothing_exits_6_and_status_and_doctor_fail(
        home: Path) -> None:
    """Another owner's newer ACTIVATION_BARRIER fences this engine's shard: its log still
    takes commands, but this engine applies nothing more there."""
    from nereus.records import ActivationBarrier, encode

    route = RouteRef("default", 2)
    ids = [f"fenced-{n}" for n in range(40)
           if route.shard_for(f"fenced-{n}") == ShardId("default", 0)][:2]
    assert _schedule(home, "--id", ids[0]).code == 0
    with running_engine(home):
        epoch = next(s["epoch"] for s in run_nereus("--json", "engine", "status", home=home)
                     .json()["shards"] if s["shard"] == "default/0")
        barrier = ActivationBarrier(barrier_id="b-other", owner_id="other-node",
                                    fencing_epoch=epoch + 1)
        home_log(home, ShardId("default", 0)).append([encode(barrier)])
        wait_until("shard default/0 FENCED", lambda: any(s["state"] == "FENCED" for s in run_nereus(
            "--json", "engine", "status", home=home).json()["shards"]) or None, 30)
        waited = _schedule(home, "--id", ids[1], "--wait")
        assert waited.code == ExitCode.RESULT_NOT_KNOWN, waited.stdout + waited.stderr
        assert waited.json()["evidence"] == "QUEUED"
        assert "result not known yet" in waited.stderr
        assert f"nereus command show {waited.json()['command_id']}" in waited.stderr
        closed = run_nereus("--json", "lane", "close", "local", "--reason", "test", "--yes",
                            "--wait", home=home)
        assert closed.code == ExitCode.RESULT_NOT_KNOWN, closed.stdout + closed.stderr
        evidence = {r["shard"]: r["evidence"] for r in closed.json()["receipts"]}
        assert evidence == {"default/0": "QUEUED", "default/1": "APPLIED"}
        key = closed.json()["receipts"][0]["idempotency_key"]
        assert run_nereus("--json", "command", "show", key, home=home).code == \
            ExitCode.RESULT_NOT_KNOWN
        status = run_nereus("--json", "engine", "status", home=home)
        assert status.code == 1
        assert status.json()["healthy"] is False
        assert any("default/0 is FENCED" in p for p in status.json()["problems"])
        human = run_nereus("engine", "status", home=home)
        assert human.code == 1 and "not healthy" in human.stdout
        doctor = run_nereus("--json", "doctor", home=home)
        assert doctor.code == 1
        engine = next(c for c in doctor.json()["checks"] if c["name"] == "engine")
        assert not engine["ok"] and "default/0 is FENCED" in engine["detail"]


def test_a_batch_over_the_admin_request_limit_goes_in_chunks(engine_home: Path,
                                                             tmp_path: Path) -> None:
    """A ~70 MB batch (over the admin socket's 64 MiB) goes in chunks: every line queued, in
    order, with its line number."""
    payload = "x" * 60_000
    lines: list[dict[str, Any] | str] = [
        {"lane": "local", "deliver_at": WHEN, "payload": payload, "id": f"big-{n}"}
        for n in range(1_150)]  # ~69 MB of payloads, ~92 MB as base64 requests
    batch = write_batch(tmp_path / "big.jsonl", lines)
    assert batch.stat().st_size > 64 << 20
    result = run_nereus("--json", "message", "schedule", "--batch", str(batch), home=engine_home,
                        timeout=280)
    assert result.code == 0, result.stderr[-2000:]
    doc = result.json()
    assert doc["queued"] == 1_150 and doc["rejected"] == 0
    assert [r["line"] for r in doc["receipts"]] == list(range(1, 1_151))


def test_the_servers_refusal_reaches_the_operator_as_it_said_it(engine_home: Path) -> None:
    """A request over the admin socket's limit is answered with the server's own words, not
    "engine unreachable"."""
    from nereus.adapters.admin.admin_client import AdminClient
    from nereus.adapters.admin.wire import AppendAnswer, AppendRequest, RecordToAppend
    from nereus.errors import UsageError

    client = AdminClient(engine_home / "run" / "admin.sock")
    too_big = AppendRequest(records=[RecordToAppend(shard="default/0", data=bytes(49 << 20))])
    with pytest.raises(UsageError, match="over the admin socket's limit of 67108864 bytes"):
        client.post("/v1/commands", too_big, AppendAnswer)


def test_an_interrupted_batch_says_what_was_acknowledged_and_the_retry_is_safe(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The engine appends the second chunk, then the connection dies before its receipts
    arrive (as when the engine is killed mid-request): the lines of that chunk are
    reported not acknowledged, and re-running the retry file schedules each line once."""
    from nereus.cli import main as cli_main
    from nereus.cli import submission
    from nereus.errors import EngineUnreachable

    batch = write_batch(tmp_path / "batch.jsonl", [
        {"lane": "local", "delay": "1h", "payload": f"m{n}"} for n in range(7)])
    real = submission.submit_chunk
    calls = {"n": 0}

    def dying(sink: Any, chunk: Any, wait: bool) -> Any:
        calls["n"] += 1
        answer = real(sink, chunk, wait)
        if calls["n"] == 2:
            raise EngineUnreachable("the engine did not answer: connection reset")
        return answer

    monkeypatch.setattr(submission, "CHUNK_RECORDS", 3)
    monkeypatch.setattr(submission, "submit_chunk", dying)
    with running_engine(home):
        with pytest.raises(SystemExit) as ended:
            cli_main.main(["--home", str(home), "--json", "message", "schedule", "--batch",
                           str(batch)])
        assert ended.value.code == ExitCode.ENGINE_UNREACHABLE
        doc = json.loads(capsys.readouterr().out)
        assert doc["acknowledged_count"] == 3
        assert [r["line"] for r in doc["acknowledged"]] == [1, 2, 3]
        assert doc["not_acknowledged_lines"] == [4, 5, 6, 7]
        assert "a retry is safe" in doc["hint"]
        retry = Path(doc["retry_file"])
        assert len(retry.read_text().splitlines()) == 4
        monkeypatch.setattr(submission, "submit_chunk", real)
        again = run_nereus("--json", "message", "schedule", "--batch", str(retry), "--wait",
                           home=home)
        assert again.code == 0, again.stderr
        receipts = again.json()["receipts"]
        # lines 4-6 were appended before the connection died: applied once, answered again
        assert [r["duplicate_of"] is not None for r in receipts] == [True, True, True, False]
        listed = run_nereus("--json", "message", "list", home=home).json()["messages"]
        assert len(listed) == 7


def test_an_interrupted_batch_from_standard_input_leaves_its_retry_file_in_the_home(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A `--batch -` that stops part-way (the log write of its second chunk fails) has no
    file to write a retry next to: the retry file goes to the home's batch/ folder, private,
    and running it with the installed nereus queues exactly the lines not acknowledged."""
    import io
    import stat
    import sys

    from nereus.cli import main as cli_main
    from nereus.cli import submission

    lines = "".join(json.dumps({"lane": "local", "delay": "1h", "id": f"pipe-{n}"}) + "\n"
                    for n in range(7))
    real = submission.submit_chunk
    calls = {"n": 0}

    def failing(sink: Any, chunk: Any, wait: bool) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return real(sink, chunk, wait)

    monkeypatch.setattr(submission, "CHUNK_RECORDS", 3)
    monkeypatch.setattr(submission, "submit_chunk", failing)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    with pytest.raises(SystemExit) as ended:
        cli_main.main(["--home", str(home), "--json", "message", "schedule", "--batch", "-"])
    assert ended.value.code == ExitCode.SERVICE_UNREACHABLE
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"].startswith("the batch from standard input stopped after 3 of 7")
    assert doc["not_acknowledged_lines"] == [4, 5, 6, 7]
    retry = Path(doc["retry_file"])
    assert retry.parent == home / "batch" and retry.name.startswith("stdin.retry-")
    assert stat.S_IMODE(retry.stat().st_mode) & 0o077 == 0
    assert f"--batch {retry}" in doc["hint"]
    assert list(workdir.iterdir()) == []  # nothing left in the working directory
    again = run_nereus("--json", "message", "schedule", "--batch", str(retry), home=home)
    assert again.code == 0, again.stderr
    assert [r["delay_message_id"] for r in again.json()["receipts"]] == [
        f"pipe-{n}" for n in range(3, 7)]


def _damage_log_under_the_engine(segment: Path) -> None:
    """Append a frame whose payload fails its CRC and an intact frame after it: the shard
    loop, reading on, meets damage that is not a torn tail (LogCorruption: FAILED)."""
    from nereus.framing import encode_frame

    bad = bytearray(encode_frame(1, b"NR-damaged-record"))
    bad[-1] ^= 0xFF
    with open(segment, "ab") as handle:
        handle.write(bytes(bad) + encode_frame(2, b"NR-intact-record"))


def test_a_failed_shard_is_loud_in_the_log_status_and_doctor(home: Path) -> None:
    """A shard whose log is damaged under the engine is FAILED with its reason in engine status
    (exit 1), doctor fails, and engine.log has shard_failed at error."""
    assert _schedule(home, "--id", "loud-0").code == 0
    with running_engine(home):
        (segment,) = sorted((home / "shardlog" / "default" / "0").glob("*.seg"))
        _damage_log_under_the_engine(segment)
        status = wait_until("an unhealthy status",
                            lambda: ((r := run_nereus("--json", "engine", "status", home=home))
                          .code == 1 and r) or None, 30)
        shard = next(s for s in status.json()["shards"] if s["shard"] == "default/0")
        assert shard["state"] == "FAILED" and "PAYLOAD_CRC" in shard["error"]
        assert any("default/0 is FAILED" in p and "LogCorruption" in p
                   for p in status.json()["problems"])
        doctor = run_nereus("--json", "doctor", home=home)
        assert doctor.code == 1
    log = (home / "log" / "engine.log").read_text().splitlines()
    failed = [json.loads(line) for line in log if '"shard_failed"' in line]
    assert failed and failed[0]["level"] == "error" and "LogCorruption" in failed[0]["reason"]
