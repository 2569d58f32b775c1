"""Checkpoints as an operator uses them (installed `nereus`, fresh home, --json): take,
verify (and every way verification must fail), restore, deep verify, Recovery Set,
retention against the Recovery Floor, and recovery of a lost database on engine start."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.client import RouteRef, prepare_schedule
from nereus.records import Cancel, decode, encode
from nereus.shard import ShardId
from tests.conftest import run_nereus
from tests.homelog import home_log


def schedule_many(home: Path, count: int, *, start: int = 0) -> None:
    lines = [json.dumps({"id": f"m{n}", "lane": "local", "delay": "1h", "payload": f"p{n}"})
             for n in range(start, start + count)]
    batch = home / f"batch-{start}.jsonl"
    batch.write_text("\n".join(lines))
    result = run_nereus("message", "schedule", "--batch", str(batch), home=home)
    assert result.code == 0, result.stderr


def replay_live(home: Path, shard: str = "default/0") -> None:
    """Build the 'live' database offline (the engine is not needed for checkpoints)."""
    state = home / "state" / shard
    if state.exists():
        shutil.rmtree(state)
    result = run_nereus("shard", "replay", shard, "--empty", "--into", str(state), home=home)
    assert result.code == 0, result.stderr


def create(home: Path, shard: str = "default/0") -> dict[str, object]:
    result = run_nereus("--json", "checkpoint", "create", shard, home=home)
    assert result.code == 0, result.stderr
    data = result.json()
    assert {"checkpoint_id", "applied_position", "digest"} <= set(data)
    return dict(data)


@pytest.fixture
def one_shard(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    schedule_many(home, 200)
    replay_live(home)
    return home


def checkpoint_dir(home: Path, checkpoint_id: str) -> Path:
    (found,) = (home / "objects" / "checkpoints").glob(f"*/*/{checkpoint_id}")
    return found


def test_a_restored_checkpoint_has_exactly_the_manifest_digest(one_shard: Path,
                                                               tmp_path: Path) -> None:
    """create -> restore into an empty directory -> the digest equals the manifest's."""
    taken = create(one_shard)
    assert taken["applied_position"] == 200  # 200 schedules after the route identity at 0
    into = tmp_path / "restored"
    restore = run_nereus("--json", "checkpoint", "restore", str(taken["checkpoint_id"]),
                         "--into", str(into), home=one_shard)
    assert restore.code == 0, restore.stderr
    digest = run_nereus("--json", "shard", "digest", "default/0", "--db", str(into),
                        home=one_shard).json()
    assert digest["digest"] == taken["digest"]
    again = run_nereus("checkpoint", "restore", str(taken["checkpoint_id"]), "--into", str(into),
                       home=one_shard)
    assert again.code == 1 and "not empty" in again.stderr


def test_verify_passes_with_every_check_named(one_shard: Path) -> None:
    """verify ID --json: ok true and the named checks, each ok."""
    taken = create(one_shard)
    result = run_nereus("--json", "checkpoint", "verify", str(taken["checkpoint_id"]),
                        home=one_shard)
    assert result.code == 0, result.stdout
    data = result.json()
    assert data["ok"] is True
    names = [check["name"] for check in data["checks"]]
    for required in ("manifest", "files_present", "file_sizes", "file_checksums", "identity",
                     "db_opens", "applied_position", "digest"):
        assert required in names
    assert all(set(check) >= {"name", "ok", "detail"} for check in data["checks"])


def test_flipping_one_byte_in_any_file_fails_and_names_it(one_shard: Path,
                                                          tmp_path: Path) -> None:
    """For every file of a checkpoint copy, one flipped byte fails verify naming that file."""
    taken = create(one_shard)
    source = checkpoint_dir(one_shard, str(taken["checkpoint_id"]))
    manifest = json.loads((source / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["size"] == 0:
            continue
        copy = tmp_path / f"copy-{entry['name']}"
        shutil.copytree(source, copy)
        target = copy / entry["name"]
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0x01
        target.write_bytes(bytes(data))
        result = run_nereus("--json", "checkpoint", "verify", "--path", str(copy),
                            home=one_shard)
        assert result.code == 1, entry["name"]
        failed = [c for c in result.json()["checks"] if not c["ok"] and not c["skipped"]]
        assert failed[0]["name"] == "file_checksums"
        assert entry["name"] in failed[0]["detail"]


def test_distinct_failures_for_missing_file_bad_manifest_and_wrong_shard(tmp_path: Path) -> None:
    """A deleted file, a truncated manifest, another shard's checkpoint: distinct checks."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "2", home=home).code == 0
    schedule_many(home, 100)
    replay_live(home, "default/0")
    replay_live(home, "default/1")
    taken = create(home, "default/0")
    other = create(home, "default/1")
    source = checkpoint_dir(home, str(taken["checkpoint_id"]))

    def first_failure(path: Path) -> dict[str, object]:
        result = run_nereus("--json", "checkpoint", "verify", "--path", str(path), home=home)
        assert result.code == 1
        return next(c for c in result.json()["checks"] if not c["ok"] and not c["skipped"])

    missing = tmp_path / "missing"
    shutil.copytree(source, missing)
    victim = next(p for p in missing.iterdir() if p.name.endswith(".sst"))
    victim.unlink()
    check = first_failure(missing)
    assert check["name"] == "files_present" and victim.name in str(check["detail"])

    truncated = tmp_path / "truncated"
    shutil.copytree(source, truncated)
    text = (truncated / "manifest.json").read_bytes()
    (truncated / "manifest.json").write_bytes(text[: len(text) // 2])
    check = first_failure(truncated)
    assert check["name"] == "manifest" and "manifest.json" in str(check["detail"])

    # shard 0's catalog entry pointing at shard 1's checkpoint files and manifest
    catalog = home / "objects" / "catalog" / "default" / "0" / f"{taken['checkpoint_id']}.json"
    entry = json.loads(catalog.read_text())
    other_manifest = f"checkpoints/default/1/{other['checkpoint_id']}/manifest.json"
    entry["manifest_key"] = other_manifest
    catalog.write_text(json.dumps(entry))
    (home / "objects" / ".sha256" / catalog.relative_to(home / "objects")).unlink()
    result = run_nereus("--json", "checkpoint", "verify", str(taken["checkpoint_id"]), home=home)
    assert result.code == 1
    failed = {c["name"]: c for c in result.json()["checks"] if not c["ok"]}
    assert set(failed) == {"identity"}
    assert "default/1" in failed["identity"]["detail"]


def test_deep_verify_detects_a_log_that_does_not_replay_to_the_next_checkpoint(
        one_shard: Path) -> None:
    """Change one record after checkpoint A: --deep names the first diverging position."""
    first = create(one_shard)
    log_dir = one_shard / "shardlog" / "default" / "0"
    FileShardLog(log_dir).append([encode(Cancel(command_id="c-late", delay_message_id="m5"))])
    replay_live(one_shard)
    second = create(one_shard)
    assert run_nereus("checkpoint", "verify", str(first["checkpoint_id"]), "--deep",
                      home=one_shard).code == 0
    # rewrite the log so the late cancel names another message
    records = FileShardLog(log_dir).read(0, 10_000)
    (late,) = [r.position for r in records
               if getattr(decode(r.payload), "command_id", None) == "c-late"]
    tampered = one_shard / "tampered"
    rewritten = FileShardLog(tampered)
    for record in records:
        data = record.payload
        decoded = decode(data)
        if isinstance(decoded, Cancel) and decoded.command_id == "c-late":
            data = encode(Cancel(command_id="c-late", delay_message_id="m7"))
        rewritten.append([data])
    rewritten.close()
    shutil.rmtree(log_dir)
    shutil.move(str(tampered), str(log_dir))
    result = run_nereus("--json", "checkpoint", "verify", str(first["checkpoint_id"]), "--deep",
                        home=one_shard)
    assert result.code == 1
    checks = {c["name"]: c for c in result.json()["checks"]}
    assert checks["digest"]["ok"] is True
    assert checks["deep_compare"]["ok"] is False
    assert str(second["checkpoint_id"]) in checks["deep_compare"]["detail"]
    assert f"first diverging position {late}:" in checks["divergence"]["detail"]


def test_retention_never_crosses_the_recovery_floor(tmp_path: Path) -> None:
    """prune deletes segments below the floor and refuses to go past it."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    writer = home_log(home, ShardId("default", 0), segment_bytes=4096)  # many to prune
    route = RouteRef("default", 1)
    writer.append([prepare_schedule(route, command_id=f"c{n}", delay_message_id=f"m{n}",
                                    lane="local", deliver_at_ms=10**13).data
                   for n in range(400)])
    writer.close()
    replay_live(home)
    taken = create(home)
    floor = int(str(taken["applied_position"])) + 1
    refused = run_nereus("shard", "prune", "default/0", "--before", str(floor + 1), home=home)
    assert refused.code == 1 and "Recovery Floor" in refused.stderr
    pruned = run_nereus("--json", "shard", "prune", "default/0", home=home)
    assert pruned.code == 0, pruned.stderr
    data = pruned.json()
    assert data["deleted"] and data["log_start_position"] <= floor
    shown = run_nereus("--json", "recovery-set", "verify", "default/0", home=home)
    assert shown.code == 0, shown.stdout
    assert shown.json()["ok"] is True


def test_recovery_set_verify_fails_when_the_log_no_longer_covers_the_floor(
        one_shard: Path) -> None:
    """Segments deleted behind nereus's back: recovery-set verify names log_retention."""
    floor = int(str(create(one_shard)["applied_position"])) + 1
    schedule_many(one_shard, 60, start=500)
    log_dir = one_shard / "shardlog" / "default" / "0"
    records = FileShardLog(log_dir).read(0, 10_000)
    shutil.rmtree(log_dir)
    log = FileShardLog(log_dir, segment_bytes=1)  # one record per segment
    log.append([r.payload for r in records])
    log.close()
    for path in sorted(log_dir.glob("*.seg"))[:floor + 10]:
        path.unlink()
    result = run_nereus("--json", "recovery-set", "verify", "default/0", home=one_shard)
    assert result.code == 1
    failed = [c["name"] for c in result.json()["checks"] if not c["ok"]]
    assert failed == ["log_retention"]


KILL_DURING_UPLOAD = """
import os, sys, time, uuid
from pathlib import Path
from nereus.adapters.offline.checkpoint_take import checkpoint_now
from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.shard import ShardId
from nereus.state.store import ShardStore

class Slow(LocalObjectStore):
    def put_file(self, key, path):
        info = super().put_file(key, path)
        print("uploaded", key, flush=True)
        time.sleep(0.3)
        return info

home = Path(sys.argv[1])
store = ShardStore.open(home / "state" / "default" / "0")
checkpoint_now(store, ShardId("default", 0), Slow(home / "objects"), home / "staging",
               token=uuid.uuid4().hex[:8], now_ms=0)
print("done", flush=True)
"""


def test_kill_during_upload_leaves_no_catalog_entry(one_shard: Path) -> None:
    """SIGKILL after some files are up: no catalog entry points at the partial checkpoint."""
    proc = subprocess.Popen([sys.executable, "-c", KILL_DURING_UPLOAD, str(one_shard)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("uploaded checkpoints/")
    proc.kill()
    proc.wait()
    assert list((one_shard / "objects" / "checkpoints").glob("*/*/*/*"))
    assert not (one_shard / "objects" / "catalog").exists() or not list(
        (one_shard / "objects" / "catalog").rglob("*.json"))
    listed = run_nereus("--json", "checkpoint", "list", "default/0", home=one_shard).json()
    assert listed["checkpoints"] == []
    taken = create(one_shard)
    assert run_nereus("checkpoint", "verify", str(taken["checkpoint_id"]),
                      home=one_shard).code == 0


def test_engine_start_restores_a_missing_or_damaged_database(one_shard: Path) -> None:
    """No database (or a damaged one): the engine restores the newest member and replays."""
    taken = create(one_shard)
    schedule_many(one_shard, 20, start=200)
    shutil.rmtree(one_shard / "state" / "default" / "0")
    started = run_nereus("engine", "start", home=one_shard)
    assert started.code == 0, started.stderr
    try:
        shards = run_nereus("--json", "shard", "list", home=one_shard).json()
        assert shards[0]["applied_position"] >= 220
    finally:
        assert run_nereus("engine", "stop", home=one_shard).code == 0
    log = (one_shard / "log" / "engine.log").read_text()
    assert "state_restored" in log and str(taken["checkpoint_id"]) in log
    current = one_shard / "state" / "default" / "0" / "CURRENT"
    current.write_text("garbage\n")
    started = run_nereus("engine", "start", home=one_shard)
    assert started.code == 0, started.stderr
    assert run_nereus("engine", "stop", home=one_shard).code == 0
    assert "state_damaged" in (one_shard / "log" / "engine.log").read_text()
    assert list((one_shard / "state" / "default").glob("0.damaged-*"))


def test_shard_log_and_dump_decode_offline(one_shard: Path) -> None:
    """shard log (JSON lines, kind filter) and shard dump (families) work without the engine."""
    result = run_nereus("--json", "shard", "log", "default/0", "--kind", "SCHEDULE", "--to", "5",
                        home=one_shard)
    assert result.code == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["position"] for line in lines] == [1, 2, 3, 4, 5]  # 0: the route identity
    assert {line["kind"] for line in lines} == {"SCHEDULE"}
    assert lines[0]["ids"]["delay_message_id"] == "m0" and "lane=local" in lines[0]["summary"]
    dump = run_nereus("--json", "shard", "dump", "default/0", "--cf", "msg", "--prefix", "m1",
                      "--limit", "3", home=one_shard)
    assert dump.code == 0
    data = dump.json()
    assert data["count"] == 3 and data["truncated"] is True
    assert all(e["family"] == "msg" and e["key"]["delay_message_id"].startswith("m1")
               for e in data["entries"])
    assert data["entries"][0]["value"]["state"] == "SCHEDULED"
    bad = run_nereus("shard", "dump", "default/0", "--cf", "nope", home=one_shard)
    assert bad.code == 2
