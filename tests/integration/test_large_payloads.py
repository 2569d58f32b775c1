"""The large-payload path: RESERVE -> upload -> attest -> COMMIT -> SCHEDULE(payload_ref),
materialisation at Claim, and ``nereus payload gc`` (never below the Recovery Floor)."""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nereus import records as r
from nereus.adapters.objectstore.local import LocalObjectStore
from nereus.adapters.objectstore.protocol import ObjectCorrupt, ObjectMissing
from nereus.adapters.shardlog.file import FileShardLog
from nereus.client import RouteRef, prepare_payload_reserve, queue
from nereus.engine.scheduler.drr import DrrState
from nereus.engine.scheduler.payloads import FetchPayload
from nereus.engine.scheduler.permits import PermitLimits, Permits
from nereus.engine.scheduler.planner import Owner, Planner, PlannerSettings
from nereus.engine.shard_loop import ShardLoop
from nereus.errors import ServiceUnreachable
from nereus.publish import template_digest
from nereus.records import MessageState
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, decode_value
from nereus.testing import MemoryShard
from nereus.trusted_time import TrustedTime
from tests.conftest import CliResult, run_nereus
from tests.daemon import read_outbox, running_engine, wait_for
from tests.homelog import home_log
from tests.unit.builders import activate, op, schedule

INLINE_LIMIT = 64
OWNER = Owner("owner", "store", 1)
NOW = TrustedTime(10_000, 10_010)


# --- helpers -----------------------------------------------------------------------------
def small_inline_home(tmp_path: Path, *, partitions: int = 2) -> Path:
    """A fresh home whose inline limit is tiny, so a few KB take the large-payload path."""
    home = tmp_path / "home"
    result = run_nereus("init", "--partitions", str(partitions), home=home)
    assert result.code == 0, result.stderr
    config = home / "nereus.toml"
    text = config.read_text().replace("max_inline_payload_bytes = 65536",
                                      f"max_inline_payload_bytes = {INLINE_LIMIT}")
    config.write_text(text)
    return home


def payload_file(tmp_path: Path, size: int = 10_000, name: str = "big.bin") -> Path:
    path = tmp_path / name
    path.write_bytes(bytes((i * 7 + i // 251) % 256 for i in range(size)))
    return path


def schedule_file(home: Path, path: Path, *extra: str) -> CliResult:
    return run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                      "--payload-file", str(path), *extra, home=home)


def log_lines(home: Path, shard: str) -> list[dict[str, Any]]:
    """The shard's decoded log after its route identity (the first record of every log)."""
    result = run_nereus("--json", "shard", "log", shard, home=home)
    assert result.code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert not lines or lines[0]["kind"] == "ROUTE_IDENTITY", lines[:1]
    return lines[1:]


def gc(home: Path, *args: str) -> CliResult:
    return run_nereus("--json", "payload", "gc", *args, home=home, input_text="")


def keys_of(items: list[dict[str, Any]]) -> set[str]:
    return {item["key"] for item in items}


# --- the CLI flow ------------------------------------------------------------------------
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
    assert "max_payload_bytes" in result.stderr
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
    from nereus.adapters.objectstore.protocol import ObjectInfo

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


_WIRED = "fetch_payload" in inspect.signature(ShardLoop.__init__).parameters


@pytest.mark.skipif(not _WIRED, reason="the engine does not pass fetch_payload to its "
                    "shard loops yet")
def test_the_engine_publishes_the_full_payload(tmp_path: Path) -> None:
    """End to end: the outbox line carries the file's bytes, materialised at Claim."""
    import base64

    home = small_inline_home(tmp_path, partitions=1)
    path = payload_file(tmp_path)
    result = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1s",
                        "--payload-file", str(path), "--id", "big-e2e", home=home)
    assert result.code == 0, result.stderr
    with running_engine(home):
        lines = wait_for(lambda: read_outbox(home / "outbox" / "local.jsonl"), timeout=30,
                         what="the large payload to publish")
    line = lines[0]
    assert line["delay_message_id"] == "big-e2e"
    data = (base64.b64decode(line["payload"]) if line.get("payload_encoding") == "base64"
            else line["payload"].encode())
    assert data == path.read_bytes()


# --- materialisation at Claim (the Planner) ----------------------------------------------
def commit_payload(shard: MemoryShard, payload_id: str, data: bytes) -> str:
    """Reserve and commit ``data`` as ``payload_id``; returns its object key."""
    sha = hashlib.sha256(data).hexdigest()
    object_key = f"payloads/default/0/{payload_id}"
    shard.apply(r.PayloadReserve(command_id=f"pr-{payload_id}", payload_id=payload_id,
                                 size_bytes=len(data), sha256=sha, expires_at_ms=10**12))
    result = shard.result(r.PayloadCommit(command_id=f"pc-{payload_id}", payload_id=payload_id,
                                          size_bytes=len(data), sha256=sha,
                                          object_key=object_key))
    assert result.status == r.ResultStatus.APPLIED, result.detail
    return object_key


class FakeObjects:
    """A fetch_payload stub: bytes by key, or an exception to raise; counts calls."""

    def __init__(self, objects: dict[str, bytes | Exception]) -> None:
        self.objects = objects
        self.calls: list[str] = []

    def __call__(self, key: str) -> bytes:
        self.calls.append(key)
        found = self.objects.get(key, ObjectMissing(f"no object {key} in fake://"))
        if isinstance(found, Exception):
            raise found
        return found


def planner(store: ShardStore, fetch: FetchPayload | None, *,
            permits: Permits | None = None) -> Planner:
    counter = itertools.count()
    return Planner(store, permits or Permits(PermitLimits()), DrrState(),
                   PlannerSettings(quantum=16, max_deficit=32), lambda: f"id{next(counter)}",
                   fetch_payload=fetch)


def lanes(store: ShardStore, name: str = "local") -> dict[str, Lane]:
    raw = store.get(keys.lane_key(name))
    return {name: Lane(name=name) if raw is None else decode_value(raw, Lane)}


def test_a_committed_payload_is_materialised_into_the_template(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """The claim's template carries the object's bytes; permits and digest count them."""
    shard = MemoryShard()
    data = b"x" * 5_000
    object_key = commit_payload(shard, "p1", data)
    shard.apply(schedule("big", 1_000, payload_ref="p1"))
    store = store_from(shard)
    permits = Permits(PermitLimits())
    fetch = FakeObjects({object_key: data})
    plan = planner(store, fetch, permits=permits).round(NOW, 0, OWNER, lanes(store),
                                                        lambda _: True, {}, set())
    assert fetch.calls == [object_key]
    [claim] = plan.claims
    assert claim.template.payload == data and claim.size_bytes == len(data)
    assert permits.bytes_used == len(data)
    admission = r.decode(claim.admission)
    assert isinstance(admission, r.PublishAdmission)
    assert admission.prepared_digest == template_digest(claim.template)
    assert not plan.expiries


def test_byte_permits_count_the_real_payload_size(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """Two 3000-byte payloads under a 4000-byte budget: one claim, then out of permits."""
    shard = MemoryShard()
    stubs: dict[str, bytes | Exception] = {}
    for n in range(2):
        data = bytes([n]) * 3_000
        stubs[commit_payload(shard, f"p{n}", data)] = data
        shard.apply(schedule(f"m{n}", 1_000 + n, payload_ref=f"p{n}"))
    store = store_from(shard)
    plan = planner(store, FakeObjects(stubs), permits=Permits(PermitLimits(bytes=4_000))).round(
        NOW, 0, OWNER, lanes(store), lambda _: True, {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["m0"]
    assert plan.waiting["local"] == "out of permits"


@pytest.mark.parametrize(("problem", "words"), [
    (None, "missing"),
    (ObjectCorrupt("object payloads/default/0/p1 does not match its recorded SHA-256"),
     "corrupt"),
    (b"y" * 5_000, "attested"),
])
def test_a_missing_or_corrupt_object_is_a_permanent_pre_send_error(
    store_from: Callable[[MemoryShard], ShardStore], problem: bytes | Exception | None,
    words: str,
) -> None:
    """Missing, corrupt, or not the attested bytes: CLAIM_RESULT PERMANENT_ERROR naming the
    object key, no claim, permits returned; applied, it FAILS the message."""
    shard = MemoryShard()
    activate(shard, OWNER.owner_id, OWNER.fencing_epoch)
    object_key = commit_payload(shard, "p1", b"x" * 5_000)
    shard.apply(schedule("big", 1_000, payload_ref="p1"))
    store = store_from(shard)
    permits = Permits(PermitLimits())
    fetch = FakeObjects({} if problem is None else {object_key: problem})
    plan = planner(store, fetch, permits=permits).round(NOW, 0, OWNER, lanes(store),
                                                        lambda _: True, {}, set())
    assert plan.claims == []
    assert (permits.worker_used, permits.bytes_used) == (0, 0)
    [raw] = plan.expiries
    result = r.decode(raw)
    assert isinstance(result, r.ClaimResult)
    assert result.disposition == r.ClaimDisposition.PERMANENT_ERROR
    assert object_key in result.detail and words in result.detail
    applied = shard.result(raw, broker_ms=NOW.latest_ms)
    assert applied.status == r.ResultStatus.APPLIED, applied.detail
    message = shard.message("big")
    assert message is not None and message.state == MessageState.FAILED
    assert message.detail is not None and object_key in message.detail


def test_an_unreachable_object_store_leaves_the_message_due(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """ServiceUnreachable proves nothing: no claim, no CLAIM_RESULT, one try per round, inline
    work still claimed; the next round with the store back claims it."""
    shard = MemoryShard()
    data = b"z" * 500
    keys_ = [commit_payload(shard, f"p{n}", data) for n in range(2)]
    shard.apply(schedule("big0", 1_000, payload_ref="p0"))
    shard.apply(schedule("big1", 1_001, payload_ref="p1"))
    shard.apply(schedule("inline", 1_002, payload=b"small"))
    store = store_from(shard)
    down = FakeObjects({k: ServiceUnreachable("s3 is down") for k in keys_})
    p = planner(store, down)
    plan = p.round(NOW, 0, OWNER, lanes(store), lambda _: True, {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["inline"]
    assert plan.expiries == [] and len(down.calls) == 1
    assert "unreachable" in plan.waiting["local"]
    assert (p.permits.worker_used, p.permits.bytes_used) == (1, len(b"small"))

    p.fetch_payload = FakeObjects({k: data for k in keys_})
    plan2 = p.round(NOW, 0, OWNER, lanes(store), lambda _: True,
                    {c.delay_message_id: c for c in plan.claims}, set())
    assert sorted(c.delay_message_id for c in plan2.claims) == ["big0", "big1"]


def test_without_an_object_store_large_payloads_wait(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """A planner given no fetch_payload claims nothing with a payload_ref and fails nothing."""
    shard = MemoryShard()
    commit_payload(shard, "p1", b"x" * 100)
    shard.apply(schedule("big", 1_000, payload_ref="p1"))
    store = store_from(shard)
    plan = planner(store, None).round(NOW, 0, OWNER, lanes(store), lambda _: True, {}, set())
    assert plan.claims == [] and plan.expiries == []
    assert "no object store" in plan.waiting["local"]


def test_an_ordered_key_waits_behind_a_payload_the_store_could_not_serve(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """In an ORDERED lane, later work for a key never overtakes a skipped large payload."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", ordered=True, **op("o")))
    object_key = commit_payload(shard, "p1", b"x" * 100)
    shard.apply(schedule("first", 1_000, key="K", payload_ref="p1"))
    shard.apply(schedule("second", 2_000, key="K", payload=b"inline"))
    shard.apply(schedule("other", 3_000, key="L", payload=b"inline"))
    store = store_from(shard)
    down = FakeObjects({object_key: ServiceUnreachable("down")})
    plan = planner(store, down).round(NOW, 0, OWNER, lanes(store), lambda _: True, {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["other"]


# --- garbage collection ------------------------------------------------------------------
def reserve_directly(home: Path, *, delay_message_id: str, expires_at_ms: int,
                     data: bytes) -> str:
    """Queue a PAYLOAD_RESERVE and upload its object, as a client that died before COMMIT."""
    route = RouteRef("default", 2)
    shard = route.shard_for(delay_message_id)
    payload_id = hashlib.sha256(delay_message_id.encode()).hexdigest()[:32]
    prepared = prepare_payload_reserve(
        route, command_id=f"reserve-{payload_id}", delay_message_id=delay_message_id,
        payload_id=payload_id, size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(),
        expires_at_ms=expires_at_ms)
    logs: dict[Any, FileShardLog] = {}
    try:
        queue([prepared], lambda s: logs.setdefault(s, home_log(home, s)))
    finally:
        for log in logs.values():
            log.close()
    key = f"payloads/{shard.route}/{shard.partition}/{payload_id}"
    LocalObjectStore(home / "objects").put_bytes(key, data)
    return key


def test_gc_collects_an_expired_reservation_and_keeps_the_rest(tmp_path: Path) -> None:
    """Expired reservation and a stage-less object: collected. Committed payload and a live
    reservation: kept. Without a TTY and without --yes nothing is deleted (exit 2)."""
    home = small_inline_home(tmp_path)
    committed = schedule_file(home, payload_file(tmp_path)).json()["payload_object"]
    now = time.time_ns() // 1_000_000
    expired = reserve_directly(home, delay_message_id="gone", expires_at_ms=now - 7_200_000,
                               data=b"abandoned" * 100)
    live = reserve_directly(home, delay_message_id="uploading", expires_at_ms=now + 3_600_000,
                            data=b"in progress" * 100)
    stray = "payloads/default/1/no-stage-anywhere"
    LocalObjectStore(home / "objects").put_bytes(stray, b"stray")

    refused = gc(home)
    assert refused.code == 2 and "--yes" in refused.stderr
    assert (home / "objects" / expired).exists()

    dry = gc(home, "--dry-run")
    assert dry.code == 0, dry.stderr
    report = dry.json()
    assert report["dry_run"] is True
    assert keys_of(report["deleted"]) == {expired, stray}
    assert keys_of(report["kept"]) == {committed, live}
    assert (home / "objects" / expired).exists()

    done = gc(home, "--yes")
    assert done.code == 0, done.stderr
    assert keys_of(done.json()["deleted"]) == {expired, stray}
    assert not (home / "objects" / expired).exists()
    assert not (home / "objects" / stray).exists()
    assert (home / "objects" / committed).exists() and (home / "objects" / live).exists()

    for key in (committed, live):
        explicit = gc(home, "--key", key, "--yes")
        assert explicit.code == 1, explicit.stderr
        assert "refusing" in explicit.stderr
    assert gc(home, "--key", "checkpoints/anything", "--yes").code == 2
    assert gc(home, "--key", "payloads/default/0/nothing-here", "--yes").code == 3


def test_gc_reads_applied_state_beside_the_engine(tmp_path: Path) -> None:
    """With the engine running (state applied, opened read-only by gc) the verdicts hold."""
    home = small_inline_home(tmp_path)
    now = time.time_ns() // 1_000_000
    expired = reserve_directly(home, delay_message_id="gone", expires_at_ms=now - 7_200_000,
                               data=b"abandoned" * 100)
    with running_engine(home):
        receipt = schedule_file(home, payload_file(tmp_path), "--wait").json()
        assert receipt["result"] == "APPLIED"
        report = gc(home, "--yes").json()
    assert keys_of(report["deleted"]) == {expired}
    assert keys_of(report["kept"]) == {receipt["payload_object"]}
    assert "COMMITTED" in report["kept"][0]["reason"]


def test_gc_never_deletes_below_the_recovery_floor(tmp_path: Path) -> None:
    """An object a Recovery Set member references is kept, and deleting it explicitly is
    refused (exit 1), even when no live state or log mentions it any more."""
    home = small_inline_home(tmp_path)
    with running_engine(home):
        receipt = schedule_file(home, payload_file(tmp_path), "--wait").json()
    key, shard = receipt["payload_object"], receipt["shard"]
    made = run_nereus("--json", "checkpoint", "create", shard, home=home)
    assert made.code == 0, made.stderr

    refused = gc(home, "--key", key, "--yes")
    assert refused.code == 1
    assert "Recovery Set" in refused.stderr and key in refused.stderr

    # lose the live state and the log: only the checkpoint still needs the object
    shutil.rmtree(home / "state")
    shutil.rmtree(home / "shardlog")
    report = gc(home, "--yes")
    assert report.code == 0, report.stderr
    assert report.json()["deleted"] == []
    [kept] = report.json()["kept"]
    assert kept["key"] == key and "Recovery Floor" in kept["reason"]
    again = gc(home, "--key", key, "--yes")
    assert again.code == 1 and "Recovery Set" in again.stderr
    assert (home / "objects" / key).exists()
