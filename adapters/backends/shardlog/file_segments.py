"""The segment files of one file Shard Log directory: listing, naming, syncing the directory.

A segment is ``<base position, 20 digits>.seg``, named by the position of its first record,
so the listing sorted by name is the log in position order.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final

from nereus.adapters.home.durable_files import fsync_dir

SEGMENT_SUFFIX: Final = ".seg"
# a listing is trusted from the cache only once the directory's mtime is this old
_MTIME_TRUST_NS: Final = 2_000_000_000


class SegmentDirectory:
    """The segments of one shard's file log directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cache: tuple[int, tuple[tuple[int, Path], ...]] | None = None

    def segments(self) -> list[tuple[int, Path]]:
        """(base position, path) of every segment, in position order.

        Cached by the directory's modification time: creating or deleting a segment
        changes it, appending to one does not, so an idle poll costs one ``stat``. The
        cache is trusted only once that time is two seconds old, because file-system
        timestamps are coarse: two changes within one tick can share a stamp.
        """
        stamp = os.stat(self.directory).st_mtime_ns
        cached = self._cache
        if cached is not None and cached[0] == stamp and time.time_ns() - stamp > _MTIME_TRUST_NS:
            return list(cached[1])
        found = []
        for entry in os.scandir(self.directory):
            name = entry.name
            if name.endswith(SEGMENT_SUFFIX) and name[: -len(SEGMENT_SUFFIX)].isdigit():
                found.append((int(name[: -len(SEGMENT_SUFFIX)]), Path(entry.path)))
        found.sort()
        self._cache = (stamp, tuple(found))
        return found

    def path_of(self, base: int) -> Path:
        """The path of the segment whose first record is at position ``base``."""
        return self.directory / f"{base:020d}{SEGMENT_SUFFIX}"

    def fsync(self) -> None:
        """Make created and deleted segment names durable."""
        fsync_dir(self.directory)
