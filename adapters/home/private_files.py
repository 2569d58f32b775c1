"""A Nereus home is private: the home 0700, every file 0600, whatever the caller's umask.

The home holds the configuration (which can carry object-store secrets), the evidence
keys, the Shard Log, the database and the outbox: nothing another user of the host should
read. Both processes that write there — the ``nereus`` CLI and the engine daemon — call
``enter_private_mode`` first, so every file and directory they (and RocksDB, structlog,
the destinations) create is born private. ``loose_modes`` finds what is not, for
``nereus doctor``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

PRIVATE_UMASK: Final = 0o077
HOME_MODE: Final = 0o700


def enter_private_mode() -> None:
    """From now on this process creates files 0600 and directories 0700."""
    os.umask(PRIVATE_UMASK)


def secure_home(root: Path) -> None:
    """Make the home directory itself 0700 (it may have been made by someone else)."""
    try:
        if stat.S_IMODE(root.stat().st_mode) != HOME_MODE:
            root.chmod(HOME_MODE)
    except OSError:
        pass  # not ours to change; doctor reports it


def loose_modes(root: Path, *, limit: int = 20) -> Iterator[tuple[Path, int]]:
    """Paths under ``root`` (and ``root`` itself) that others may read or enter: up to
    ``limit`` of them, each with its mode. Symbolic links are not followed."""
    found = 0
    for directory, dirnames, filenames in os.walk(root):
        base = Path(directory)
        for path in (base, *(base / name for name in filenames)):
            if path != base and path.is_symlink():
                continue
            try:
                mode = stat.S_IMODE(path.lstat().st_mode)
            except OSError:
                continue
            if mode & 0o077:
                yield path, mode
                found += 1
                if found >= limit:
                    return
        dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
