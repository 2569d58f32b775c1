"""Scenarios of ``tests/cli/test_typed_documents.py`` for the checkpoint commands, the
Recovery Set and ``payload gc``: each runs the command as an operator would (file object
store in the home) in every form it has — passing and failing checks, dry runs, refusals —
and returns the documents it printed, which the test holds to their Structs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from tests.conftest import CliResult, run_nereus
from tests.daemon import running_engine

SHARD = "default/0"


def _ran(result: CliResult, code: int = 0) -> dict[str, Any]:
    """The one JSON document of a command that exited with ``code``."""
    assert result.code == code, (result.code, result.stdout, result.stderr)
    document: dict[str, Any] = result.json()
    return document


def _with_state(home: Path) -> None:
    """A few messages on the shard, applied offline into its live database."""
    lines = [json.dumps({"id": f"cp-{n}", "lane": "local", "delay": "1h",
                         "payload": f"p{n}"}) for n in range(5)]
    batch = home / "batch.jsonl"
    batch.write_text("\n".join(lines))
    assert run_nereus("message", "schedule", "--batch", str(batch), home=home).code == 0
    replayed = run_nereus("shard", "replay", SHARD, "--empty", "--into",
                          str(home / "state" / SHARD), home=home)
    assert replayed.code == 0, replayed.stderr


def _create(home: Path) -> dict[str, Any]:
    return _ran(run_nereus("--json", "checkpoint", "create", SHARD, home=home))


def _checkpoint_dir(home: Path, checkpoint_id: str) -> Path:
    (found,) = (home / "objects" / "checkpoints").glob(f"*/*/{checkpoint_id}")
    return found


def _lose_a_file(home: Path, checkpoint_id: str) -> None:
    """Delete one data file of a catalogued checkpoint from the object store."""
    victim = next(p for p in _checkpoint_dir(home, checkpoint_id).iterdir()
                  if p.name.endswith(".sst"))
    victim.unlink()


def _checkpoint_create(home: Path) -> list[dict[str, Any]]:
    """Offline (the first: no parent), then by the running engine (parent: the first)."""
    _with_state(home)
    offline = _create(home)
    with running_engine(home):
        by_engine = _create(home)
    assert offline["parent"] is None
    assert by_engine["parent"] == offline["checkpoint_id"]
    return [offline, by_engine]


def _checkpoint_list(home: Path) -> list[dict[str, Any]]:
    """No checkpoint yet, then two."""
    empty = _ran(run_nereus("--json", "checkpoint", "list", SHARD, home=home))
    _with_state(home)
    _create(home)
    _create(home)
    listed = _ran(run_nereus("--json", "checkpoint", "list", SHARD, home=home))
    assert empty["checkpoints"] == [] and len(listed["checkpoints"]) == 2
    return [empty, listed]


def _checkpoint_verify(home: Path) -> list[dict[str, Any]]:
    """By id (passes), --path --deep (passes, with the replay checks), a directory whose
    manifest does not parse (no checkpoint_id) and a download that fails (no path)."""
    _with_state(home)
    taken = _create(home)["checkpoint_id"]
    by_id = _ran(run_nereus("--json", "checkpoint", "verify", taken, home=home))
    directory = _checkpoint_dir(home, taken)
    deep = _ran(run_nereus("--json", "checkpoint", "verify", "--path", str(directory), "--deep",
                           home=home))
    damaged = home.parent / "damaged"
    damaged.mkdir()
    (damaged / "manifest.json").write_text("{")
    unreadable = _ran(run_nereus("--json", "checkpoint", "verify", "--path", str(damaged),
                                 home=home), code=1)
    _lose_a_file(home, taken)
    not_downloaded = _ran(run_nereus("--json", "checkpoint", "verify", taken, home=home),
                          code=1)
    assert by_id["ok"] and deep["ok"]
    assert "deep_replay" in [c["name"] for c in deep["checks"]]
    assert unreadable["checkpoint_id"] is None
    assert not_downloaded["path"] is None
    return [by_id, deep, unreadable, not_downloaded]


def _as_format_1(directory: Path) -> None:
    """Rewrite a checkpoint directory's manifest as earlier builds wrote it (format 1:
    SHA-256 checksums, the v1 state digest)."""
    import msgspec

    from nereus.checkpoint.manifest import MANIFEST_NAME, FileEntry, encode_json
    from nereus.checkpoint.verify import file_sha256, read_manifest, store_digest
    from nereus.state.store import ShardStore

    manifest = read_manifest(directory)
    with ShardStore.open(directory, read_only=True) as store:
        v1 = store_digest(store, 1)
    files = [FileEntry(name=f.name, size=f.size, sha256=file_sha256(directory / f.name)[1])
             for f in manifest.files]
    (directory / MANIFEST_NAME).write_bytes(encode_json(
        msgspec.structs.replace(manifest, format_version=1, digest=v1, files=files)))


def _checkpoint_upgrade(home: Path) -> list[dict[str, Any]]:
    """A format 1 copy upgraded to format 2 (then verifies), upgraded again (nothing to
    do), and a damaged one refused unchanged."""
    import shutil

    _with_state(home)
    taken = _create(home)
    copy = home.parent / "cp-format-1"
    shutil.copytree(_checkpoint_dir(home, taken["checkpoint_id"]), copy)
    _as_format_1(copy)
    first = _ran(run_nereus("--json", "checkpoint", "upgrade", "--path", str(copy), home=home))
    again = _ran(run_nereus("--json", "checkpoint", "upgrade", "--path", str(copy), home=home))
    assert (first["format_version_before"], first["format_version"], first["upgraded"]) == \
        (1, 2, True)
    assert first["digest"] == taken["digest"] and not again["upgraded"]
    assert _ran(run_nereus("--json", "checkpoint", "verify", "--path", str(copy),
                           home=home))["ok"]
    _as_format_1(copy)
    victim = max((p for p in copy.iterdir() if p.suffix == ".sst"), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    refused = run_nereus("--json", "checkpoint", "upgrade", "--path", str(copy), home=home)
    assert refused.code == 1 and "file_checksums" in refused.stdout + refused.stderr, refused
    return [first, again]


def _checkpoint_restore(home: Path) -> list[dict[str, Any]]:
    """Into a new directory, over that restore (--force: replaced restored), and a restore
    whose download fails (ok false, exit 1)."""
    _with_state(home)
    taken = _create(home)["checkpoint_id"]
    into = home.parent / "restored"
    fresh = _ran(run_nereus("--json", "checkpoint", "restore", taken, "--into", str(into),
                            home=home))
    again = _ran(run_nereus("--json", "checkpoint", "restore", taken, "--into", str(into),
                            "--force", home=home))
    _lose_a_file(home, taken)
    failed = _ran(run_nereus("--json", "checkpoint", "restore", taken, "--into",
                             str(home.parent / "never"), home=home), code=1)
    assert (fresh["replaced"], again["replaced"]) == (None, "restored")
    assert failed["ok"] is False
    return [fresh, again, failed]


def _checkpoint_prune(home: Path) -> list[dict[str, Any]]:
    """Four checkpoints, Recovery Set of three: --keep 1 deletes one and refuses two
    (exit 1), first as a dry run; then nothing left to prune (exit 0)."""
    _with_state(home)
    for _ in range(4):
        _create(home)
    dry = _ran(run_nereus("--json", "checkpoint", "prune", SHARD, "--keep", "1", "--dry-run",
                          home=home), code=1)
    pruned = _ran(run_nereus("--json", "checkpoint", "prune", SHARD, "--keep", "1", "--yes",
                             home=home), code=1)
    clean = _ran(run_nereus("--json", "checkpoint", "prune", SHARD, "--yes", home=home))
    assert dry["dry_run"] and len(dry["deleted"]) == 1 and len(dry["refused"]) == 2
    assert pruned["deleted"] == dry["deleted"] and clean["deleted"] == []
    return [dry, pruned, clean]


def _recovery_set_show(home: Path) -> list[dict[str, Any]]:
    """No member yet, then one."""
    empty = _ran(run_nereus("--json", "recovery-set", "show", SHARD, home=home))
    _with_state(home)
    _create(home)
    one = _ran(run_nereus("--json", "recovery-set", "show", SHARD, home=home))
    assert empty["members"] == [] and len(one["members"]) == 1
    return [empty, one]


def _recovery_set_verify(home: Path) -> list[dict[str, Any]]:
    """Without members (fails, exit 1), with two sound ones, and with one that lost a file."""
    empty = _ran(run_nereus("--json", "recovery-set", "verify", SHARD, home=home), code=1)
    _with_state(home)
    _create(home)
    last = _create(home)["checkpoint_id"]
    sound = _ran(run_nereus("--json", "recovery-set", "verify", SHARD, home=home))
    _lose_a_file(home, last)
    broken = _ran(run_nereus("--json", "recovery-set", "verify", SHARD, home=home), code=1)
    assert len(sound["member_reports"]) == 2 and sound["ok"]
    assert [r["ok"] for r in broken["member_reports"]] == [True, False]
    return [empty, sound, broken]


def _payload_gc(home: Path) -> list[dict[str, Any]]:
    """A committed large payload (kept) and a stray object (collected): --dry-run, then
    --yes, then --key for a new stray one."""
    big = home.parent / "big.bin"
    big.write_bytes(bytes(range(256)) * 300)  # above the 64 KiB inline limit
    scheduled = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                           "--payload-file", str(big), home=home)
    committed = _ran(scheduled)["payload_object"]
    objects = LocalObjectStore(home / "objects")
    objects.put_bytes("payloads/default/1/stray-1", b"stray")
    dry = _ran(run_nereus("--json", "payload", "gc", "--dry-run", home=home))
    done = _ran(run_nereus("--json", "payload", "gc", "--yes", home=home))
    objects.put_bytes("payloads/default/1/stray-2", b"stray")
    one = _ran(run_nereus("--json", "payload", "gc", "--key", "payloads/default/1/stray-2",
                          "--yes", home=home))
    assert dry["dry_run"] and [o["key"] for o in dry["kept"]] == [committed]
    assert [o["key"] for o in done["deleted"]] == ["payloads/default/1/stray-1"]
    assert [o["key"] for o in one["deleted"]] == ["payloads/default/1/stray-2"]
    return [dry, done, one]


CHECKPOINT_SCENARIOS: dict[str, Callable[[Path], list[dict[str, Any]]]] = {
    "checkpoint create": _checkpoint_create,
    "checkpoint list": _checkpoint_list,
    "checkpoint verify": _checkpoint_verify,
    "checkpoint upgrade": _checkpoint_upgrade,
    "checkpoint restore": _checkpoint_restore,
    "checkpoint prune": _checkpoint_prune,
    "recovery-set show": _recovery_set_show,
    "recovery-set verify": _recovery_set_verify,
    "payload gc": _payload_gc,
}
