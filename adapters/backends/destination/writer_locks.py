"""A file lane's per-shard writer locks: the fence of ``fencing.py`` for an outbox file.

Beside the outbox ``PATH`` is the directory ``PATH.writers/`` with one lock file per shard
(``ROUTE.PARTITION.lock``). A process writes a shard's lines to the outbox only while it
holds that file's exclusive ``flock``, taken at the shard's recovery (or at its first
publish) and kept until the shard is let go or the process ends. The kernel drops it
when the holder dies (``kill -9`` included), so the next owner holding it knows the old
writer can write nothing more.

Whoever takes a lock writes into it the outbox's identity (device, inode, size), and
the size again after each of its writes (``note``: no fsync; a crash that loses the
outbox's tail loses no more than that). The next taker reads it back: the same file, no
shorter, means every line the previous holder wrote is still in the outbox
(``continuity``) — otherwise (the outbox was rotated, replaced or cut) absence proves
nothing and the taker says so.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class OutboxIdentity:
    """Which outbox file a lock holder found, and how long it was then."""

    device: int
    inode: int
    size: int

    @classmethod
    def of(cls, path: Path) -> OutboxIdentity | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        return cls(stat.st_dev, stat.st_ino, stat.st_size)


class WriterLocks:
    """The locks one process holds on one outbox's shards."""

    def __init__(self, outbox: Path) -> None:
        self.outbox = outbox
        self.directory = outbox.with_name(outbox.name + ".writers")
        self._held: dict[str, int] = {}  # shard -> the lock file's descriptor
        self.previous: dict[str, OutboxIdentity | None] = {}  # what the last holder found

    def lock_path(self, shard: str) -> Path:
        return self.directory / f"{shard.replace('/', '.')}.lock"

    def holds(self, shard: str) -> bool:
        return shard in self._held

    def take(self, shard: str) -> str | None:
        """Hold ``shard``'s lock (already held: nothing to do); None once held, else why
        not. Taking it records what the previous holder found in ``previous``."""
        if shard in self._held:
            return None
        path = self.lock_path(shard)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            return f"cannot open the writer lock {path}: {exc.strerror}"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return (f"another process holds the outbox writer lock {path} (a previous owner "
                    "of the shard still runs)")
        try:
            self.previous[shard] = _read_identity(fd)
            _write_identity(fd, OutboxIdentity.of(self.outbox))
        except OSError as exc:
            os.close(fd)
            return f"cannot write the writer lock {path}: {exc.strerror}"
        self._held[shard] = fd
        return None

    def note(self, shards: set[str]) -> None:
        """Record the outbox's size after a write in each of ``shards``' held locks."""
        identity = OutboxIdentity.of(self.outbox)
        for shard in shards:
            fd = self._held.get(shard)
            if fd is not None:
                _write_identity(fd, identity, sync=False)

    def free(self, shard: str) -> str | None:
        """None when this process holds ``shard``'s lock or could take it now (it is not
        kept), else why not."""
        if shard in self._held:
            return None
        path = self.lock_path(shard)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"cannot open the writer lock {path}: {exc.strerror}"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return (f"another process holds the outbox writer lock {path} (a previous owner "
                    "of the shard still runs)")
        finally:
            os.close(fd)  # closing drops the lock if it was taken
        return None

    def continuity(self, shard: str) -> str | None:
        """None when the outbox holds every line the previous holder of ``shard``'s lock
        could have written (same file, no shorter than it found it), else why not."""
        before = self.previous.get(shard)
        now = OutboxIdentity.of(self.outbox)
        if before is None:
            return (f"no earlier writer of this shard recorded the outbox in "
                    f"{self.lock_path(shard)}")
        if now is None:
            return f"the outbox {self.outbox} is gone"
        if (now.device, now.inode) != (before.device, before.inode):
            return f"the outbox {self.outbox} was replaced since the last writer took its lock"
        if now.size < before.size:
            return (f"the outbox {self.outbox} is shorter ({now.size} bytes) than when the "
                    f"last writer took its lock ({before.size})")
        return None

    def release(self, shard: str) -> None:
        fd = self._held.pop(shard, None)
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock

    def close(self) -> None:
        for shard in list(self._held):
            self.release(shard)


def _read_identity(fd: int) -> OutboxIdentity | None:
    raw = os.pread(fd, 4096, 0)
    try:
        found = json.loads(raw)
        return OutboxIdentity(int(found["device"]), int(found["inode"]), int(found["size"]))
    except (ValueError, KeyError, TypeError):
        return None


_IDENTITY_BYTES = 128  # every identity is written padded to this width, in one pwrite


def _write_identity(fd: int, identity: OutboxIdentity | None, *, sync: bool = True) -> None:
    """Overwrite the lock file's identity in one write, never emptying it first: a holder
    killed mid-update (a note after every publish) leaves the old identity or the new one,
    not an empty file that would make its orphans unprovable."""
    text = b"" if identity is None else json.dumps(
        {"device": identity.device, "inode": identity.inode, "size": identity.size}).encode()
    os.pwrite(fd, text.ljust(_IDENTITY_BYTES), 0)
    os.ftruncate(fd, _IDENTITY_BYTES)  # a longer file of an older build: its tail goes
    if sync:
        os.fsync(fd)
