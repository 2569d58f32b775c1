"""Making a directory's entries durable: after creating, renaming or deleting a file, the
directory itself is fsynced, or a crash can forget the name although the data was synced."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """fsync ``directory``, making the names created or removed in it durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
