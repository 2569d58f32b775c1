"""``nereus checkpoint restore`` protects live state, as an operator meets it (installed
`nereus`, fresh home, --json, no terminal): a running engine's state and any RocksDB held
open are refused whatever the flags; a directory the restore did not create needs --force
and confirmation; a failed restore leaves neither the target nor its staging directory;
a successful one is staged, verified, moved into place and marked as a restore's own."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_nereus
from tests.daemon import running_engine
from tests.integration.test_checkpoints import checkpoint_dir, create, replay_live, schedule_many


@pytest.fixture
def taken(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """A one-shard home with 50 messages applied, and a checkpoint of it."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    schedule_many(home, 50)
    replay_live(home)
    return home, create(home)


def restore(home: Path, checkpoint_id: object, into: Path, *flags: str) -> CliResult:
    """Restore as a script does: --json, stdin a pipe (no terminal to ask on)."""
    return run_nereus("--json", "checkpoint", "restore", str(checkpoint_id), "--into",
                      str(into), *flags, home=home, input_text="")


def listing(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``directory`` with its inode and size; RocksDB's own info log
    (``LOG``) only by inode, since a process holding the store open appends to it whenever
    its background threads have something to say."""
    return {str(p.relative_to(directory)):
            (p.stat().st_ino, 0 if p.name == "LOG" else p.stat().st_size)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def staging_dirs(target: Path) -> list[Path]:
    return sorted(target.parent.glob(f".{target.name}.restoring-*"))


def digest_of(home: Path, db: Path) -> str:
    result = run_nereus("--json", "shard", "digest", "default/0", "--db", str(db), home=home)
    assert result.code == 0, result.stderr
    return str(result.json()["digest"])


def test_force_never_touches_a_running_engines_state(
        taken: tuple[Path, dict[str, object]]) -> None:
    """--force (with or without --yes) into <home>/state/default/0 of a running engine:
    exit 1 naming the directory and why, the database untouched (same files, no marker, no
    staging dir), the engine still serving it; a shard dir under state/ that does not exist
    yet is refused too."""
    home, checkpoint = taken
    state = home / "state" / "default" / "0"
    with running_engine(home):
        inode = state.stat().st_ino
        before = {name: seen for name, seen in listing(state).items() if name.endswith(".sst")}
        for flags in (("--force",), ("--force", "--yes")):
            refused = restore(home, checkpoint["checkpoint_id"], state, *flags)
            assert refused.code == 1, refused.stdout
            error = refused.json()
            assert error["ok"] is False and error["exit_code"] == 1
            assert str(state) in error["error"] and "running" in error["error"]
            assert "engine stop" in error["hint"]
        after = {name: seen for name, seen in listing(state).items() if name.endswith(".sst")}
        assert after == before and before and state.stat().st_ino == inode
        assert not (state / ".nereus-restore").exists() and staging_dirs(state) == []
        shards = run_nereus("--json", "shard", "list", home=home).json()
        assert shards[0]["applied_position"] >= 50  # and a CHECKPOINT_MARK or two
        unborn = home / "state" / "default" / "7"
        refused = restore(home, checkpoint["checkpoint_id"], unborn)
        assert refused.code == 1 and "state/" in refused.json()["error"]
        assert not unborn.exists() and staging_dirs(unborn) == []


def test_a_rocksdb_held_open_by_any_process_is_refused(
        taken: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    """A database outside any home, held open read-write by another process (its LOCK
    held): --force (with or without --yes) is refused with exit 1 and the directory keeps
    its files."""
    home, checkpoint = taken
    db = tmp_path / "elsewhere"
    shutil.copytree(home / "state" / "default" / "0", db)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom pathlib import Path\n"
         "from nereus.state.store import ShardStore\n"
         f"store = ShardStore.open(Path({str(db)!r}))\nprint('open', flush=True)\n"
         "sys.stdin.read()\nstore.close()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        before = listing(db)
        for flags in (("--force",), ("--force", "--yes")):
            refused = restore(home, checkpoint["checkpoint_id"], db, *flags)
            assert refused.code == 1, refused.stdout
            assert "LOCK" in refused.json()["error"] and str(db) in refused.json()["error"]
            assert listing(db) == before and staging_dirs(db) == []
    finally:
        holder.communicate("", timeout=30)


def test_a_directory_restore_did_not_create_needs_force_and_confirmation(
        taken: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    """A non-empty directory of the operator's: without --force exit 1, with --force but
    without a terminal and without --yes exit 2 (nothing to ask on); both leave it as it
    was. --force --yes replaces it, and says so."""
    home, checkpoint = taken
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me\n")
    plain = restore(home, checkpoint["checkpoint_id"], mine)
    assert plain.code == 1 and "not empty" in plain.json()["error"]
    unconfirmed = restore(home, checkpoint["checkpoint_id"], mine, "--force")
    assert unconfirmed.code == 2, unconfirmed.stdout
    assert "confirmation" in unconfirmed.json()["error"]
    assert "--yes" in unconfirmed.json()["hint"]
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert (mine / "notes.txt").read_text() == "keep me\n" and staging_dirs(mine) == []
    confirmed = restore(home, checkpoint["checkpoint_id"], mine, "--force", "--yes")
    assert confirmed.code == 0, confirmed.stderr
    assert confirmed.json()["replaced"] == "foreign"
    assert not (mine / "notes.txt").exists()
    assert digest_of(home, mine) == checkpoint["digest"]


def test_a_successful_restore_is_marked_private_and_replaceable_with_force_alone(
        taken: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    """A restore into a new directory verifies and digests as before, is 0700 with 0600
    files, and carries the marker naming its checkpoint: a second restore needs --force
    (exit 1 without), and --force alone then replaces it. Once the database was opened
    read-write it is somebody's state, and --force alone no longer does."""
    home, checkpoint = taken
    into = tmp_path / "restored"
    done = restore(home, checkpoint["checkpoint_id"], into)
    assert done.code == 0, done.stderr
    assert digest_of(home, into) == checkpoint["digest"]
    verified = run_nereus("--json", "checkpoint", "verify", "--path", str(into), home=home)
    assert verified.code == 0 and verified.json()["ok"] is True
    marker = json.loads((into / ".nereus-restore").read_text())
    assert marker == {"checkpoint_id": checkpoint["checkpoint_id"], "shard": "default/0"}
    assert stat.S_IMODE(into.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in into.iterdir()} == {0o600}
    assert staging_dirs(into) == []
    data = done.json()
    assert data["ok"] is True and data["replaced"] is None and data["into"] == str(into)

    again = restore(home, checkpoint["checkpoint_id"], into)
    assert again.code == 1 and "not empty" in again.json()["error"]
    replaced = restore(home, checkpoint["checkpoint_id"], into, "--force")
    assert replaced.code == 0, replaced.stderr
    assert replaced.json()["replaced"] == "restored"
    assert digest_of(home, into) == checkpoint["digest"] and staging_dirs(into) == []

    from nereus.state.store import ShardStore

    ShardStore.open(into).close()  # used as a database since: no longer a restore's own
    used = restore(home, checkpoint["checkpoint_id"], into, "--force")
    assert used.code == 2 and "not created by a restore" in used.json()["error"]


def corrupt_an_sst(home: Path, checkpoint_id: str, *, keep_checksum: bool) -> None:
    """Flip one byte of a checkpoint's .sst object. ``keep_checksum``: also record the new
    SHA-256 in the store, so the download passes and verification must catch it."""
    import hashlib

    source = checkpoint_dir(home, checkpoint_id)
    sst = next(p for p in sorted(source.iterdir()) if p.suffix == ".sst")
    data = bytearray(sst.read_bytes())
    data[len(data) // 2] ^= 0x01
    sst.write_bytes(bytes(data))
    if keep_checksum:
        meta = home / "objects" / ".sha256" / sst.relative_to(home / "objects")
        assert meta.is_file()
        meta.write_text(hashlib.sha256(bytes(data)).hexdigest())


@pytest.mark.parametrize("keep_checksum", [False, True], ids=["download", "verify"])
def test_a_failed_restore_leaves_no_target_and_no_staging(
        taken: tuple[Path, dict[str, object]], tmp_path: Path, keep_checksum: bool) -> None:
    """A corrupt checkpoint object (caught by the store's checksum on download, or by
    verification): exit 1 naming the failed check; a new target is not created, a
    restored one replaced with --force keeps its files, and no staging dir remains."""
    home, checkpoint = taken
    earlier = tmp_path / "earlier"
    assert restore(home, checkpoint["checkpoint_id"], earlier).code == 0
    before = listing(earlier)
    corrupt_an_sst(home, str(checkpoint["checkpoint_id"]), keep_checksum=keep_checksum)
    check = "file_checksums" if keep_checksum else "download"
    into = tmp_path / "new"
    failed = restore(home, checkpoint["checkpoint_id"], into)
    assert not into.exists() and staging_dirs(into) == []
    replacing = restore(home, checkpoint["checkpoint_id"], earlier, "--force")
    assert listing(earlier) == before and staging_dirs(earlier) == []
    for result in (failed, replacing):
        assert result.code == 1, result.stdout
        data = result.json()
        assert data["ok"] is False
        assert check in [c["name"] for c in data["checks"] if not c["ok"] and not c["skipped"]]


def test_a_killed_restores_staging_dir_is_swept_by_the_next(
        taken: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    """A staging dir left by a restore that was SIGKILLed (its pid dead) is removed by the
    next restore next to the same target; one of a live process is left alone."""
    home, checkpoint = taken
    into = tmp_path / "restored"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=30)
    stale = tmp_path / f".restored.restoring-{dead.stdout.strip()}-deadbeef"
    (stale / "partial").mkdir(parents=True)
    alive = tmp_path / f".restored.restoring-{os.getpid()}-cafebabe"
    alive.mkdir()
    done = restore(home, checkpoint["checkpoint_id"], into)
    assert done.code == 0, done.stderr
    assert not stale.exists() and alive.is_dir()
    alive.rmdir()
