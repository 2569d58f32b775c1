"""The journal file of a playbook: appended, one fsynced line per event, one run at a time.

A line is written and fsynced before the runner goes on, so what the journal says happened
did happen (a resumed run never skips a step it only believed done). An exclusive
``flock`` for the whole run keeps two runs of one playbook in one home from interleaving
their lines. A torn last line (a crash in the middle of a write) is cut before appending,
as the file Shard Log cuts its torn tails.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from nereus.adapters.home.durable_files import fsync_dir
from nereus.cli.playbook.language.journal import Entry, decode_entries, encode_entry
from nereus.errors import NereusError


def read_journal(path: Path) -> list[Entry]:
    """The entries in ``path`` (none when it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return decode_entries(data, origin=str(path))


class JournalBusy(NereusError):
    """Another run of this playbook holds its journal."""


class JournalFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def open(self) -> JournalFile:
        created = not self.path.parent.is_dir()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise JournalBusy(f"another run of this playbook is using {self.path}",
                              hint="wait for it to finish (one run per playbook and home)") \
                from None
        self._fd = fd
        self._cut_torn_tail(fd)
        if created:
            fsync_dir(self.path.parent)
        return self

    def _cut_torn_tail(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        if size == 0:
            return
        data = os.pread(fd, size, 0)
        if data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        os.ftruncate(fd, keep)
        os.fsync(fd)

    def append(self, entry: Entry) -> None:
        assert self._fd is not None, "open() the journal first"
        data = encode_entry(entry)
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None

    def __enter__(self) -> JournalFile:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

