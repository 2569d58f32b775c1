"""Where ``nereus checkpoint restore`` may write, and what it may replace.

**Never a live store**, whatever ``--force`` says: a RocksDB directory whose ``LOCK`` a
running process holds (asked of the kernel with ``F_GETLK``, which takes nothing),
anything under ``<home>/state/`` of a home whose engine runs, a non-empty directory of a
running home that a restore did not create, a directory holding a home, or the object
store the checkpoint comes from. **A directory a restore created** carries :data:`MARKER`
and may be replaced with ``--force`` while it holds exactly what that restore wrote.
**Anything else non-empty** is foreign: the CLI asks first. Everything here only reads;
``checkpoint_restore.restore_into`` writes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from nereus.checkpoint.manifest import MANIFEST_NAME
from nereus.layout import CONFIG_FILE

MARKER = ".nereus-restore"
"""The file a restore leaves in the directory it created: ``{"checkpoint_id", "shard"}``."""

# files a restored image may hold besides the ones its manifest lists: our own two, and
# the metadata rocksdict rewrites when it opens the directory (even read-only)
_OWN_FILES = frozenset({MARKER, MANIFEST_NAME, "rocksdict-config.json"})

State = Literal["absent", "empty", "restored", "foreign"]


@dataclass(frozen=True, slots=True)
class Live:
    """Why a target must not be touched, and what the operator can do instead."""

    reason: str
    hint: str


@dataclass(frozen=True, slots=True)
class Target:
    """A restore target as it is now."""

    path: Path
    state: State
    restored_checkpoint: str | None  # the checkpoint a restore left here (state "restored")
    live: Live | None  # set: never replace it, whatever the flags


def inspect_target(target: Path, *, protected: Sequence[tuple[Path, str]] = ()) -> Target:
    """Classify ``target``; ``protected`` are (path, what) pairs it must not hold or be
    inside of (the local object store the checkpoint is read from)."""
    path = target.absolute()
    if not path.exists() and not path.is_symlink():
        state: State = "absent"
    elif path.is_dir() and not path.is_symlink():
        state = "empty" if not any(path.iterdir()) else "foreign"
    else:
        state = "foreign"
    restored = restored_checkpoint(path) if state == "foreign" else None
    if restored is not None:
        state = "restored"
    live = live_store(path, replacing=state in ("restored", "foreign"),
                      restored=restored is not None, protected=protected)
    return Target(path, state, restored, live)


def restored_checkpoint(directory: Path) -> str | None:
    """The checkpoint id a restore left in ``directory``, if the directory still holds
    exactly what that restore wrote."""
    try:
        marker = json.loads((directory / MARKER).read_text())
        manifest = json.loads((directory / MANIFEST_NAME).read_text())
        names = set(os.listdir(directory))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or not isinstance(manifest, dict):
        return None
    checkpoint_id = marker.get("checkpoint_id")
    if not checkpoint_id or checkpoint_id != manifest.get("checkpoint_id"):
        return None
    listed = {entry.get("name") for entry in manifest.get("files", [])
              if isinstance(entry, dict)}
    if names - listed - _OWN_FILES:
        return None  # opened read-write since: RocksDB added files of its own
    return str(checkpoint_id)


def write_marker(directory: Path, *, checkpoint_id: str, shard: str) -> None:
    """Mark ``directory`` as made by a restore of ``checkpoint_id`` (file mode 0600)."""
    data = json.dumps({"checkpoint_id": checkpoint_id, "shard": shard}).encode() + b"\n"
    fd = os.open(directory / MARKER, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def live_store(path: Path, *, replacing: bool, restored: bool = False,
               protected: Sequence[tuple[Path, str]] = ()) -> Live | None:
    """Why restoring at ``path`` would touch a live store (None: it would not).

    ``replacing``: ``path`` holds something a restore would delete. ``restored``: that
    something is a restore's own untouched output (harmless to replace even inside a
    running home)."""
    resolved = path.resolve()
    ancestors = (resolved, *resolved.parents)
    for ancestor in ancestors:
        home = ancestor.parent
        if ancestor.name == "state" and _engine_runs(home):
            return Live(f"{path} is shard state of the home {home}, whose engine is running: "
                        "the engine owns every directory under its state/",
                        f"restore into a new directory, or stop the engine first "
                        f"(`nereus --home {home} engine stop`); a running engine restores "
                        "a missing shard database from its Recovery Set by itself")
    for ancestor in ancestors:
        holder = rocksdb_holder(ancestor)
        if holder is not None:
            inside = "is" if ancestor == resolved else f"is inside {ancestor}, which is"
            return Live(f"{path} {inside} a RocksDB database in use by pid {holder} (it "
                        "holds the database's LOCK file)",
                        "stop the process that has it open, or restore into a new directory")
        if replacing and not restored and ancestor != resolved and _engine_runs(ancestor):
            return Live(f"{path} is inside the home {ancestor}, whose engine is running",
                        f"restore into a new directory, or stop the engine first "
                        f"(`nereus --home {ancestor} engine stop`)")
    if replacing and not restored and resolved.is_dir():
        for directory, dirnames, filenames in os.walk(resolved):
            base = Path(directory)
            if CONFIG_FILE in filenames:
                running = ", whose engine is running" if _engine_runs(base) else ""
                return Live(f"{path} holds the Nereus home {base}{running}: its "
                            "configuration, Shard Logs and keys",
                            "restore into a new directory; a checkpoint never belongs in "
                            "place of a home")
            holder = rocksdb_holder(base) if "LOCK" in filenames else None
            if holder is not None:
                return Live(f"{path} holds a RocksDB database in use by pid {holder} (it holds "
                            f"the LOCK file of {base})", "stop the process that has it open, "
                            "or restore into a new directory")
            dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
    for where, what in protected:
        held = where.resolve()
        if _within(held, resolved) or _within(resolved, held):
            return Live(f"{path} is or holds part of {what} ({held}), which this restore "
                        "reads from", "restore into a directory outside it")
    return None


def rocksdb_holder(directory: Path) -> int | None:
    """The pid of a process that has the RocksDB database in ``directory`` open read-write
    (RocksDB holds a POSIX record lock on its ``LOCK`` file for as long as it is open).
    ``F_GETLK`` asks without taking the lock, so an engine opening the database at this
    moment is never turned away by the probe."""
    from nereus.state.store import lock_holder

    lock = directory / "LOCK"
    if not lock.is_file() or lock.is_symlink():
        return None
    return lock_holder(directory)


def _engine_runs(home: Path) -> bool:
    from nereus.adapters.home.home_lock import is_locked

    return (home / CONFIG_FILE).is_file() and is_locked(home)


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents
