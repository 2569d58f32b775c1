"""How many malloc arenas an engine process may keep (glibc).

glibc gives each thread that allocates an arena of its own, up to eight per core, and an
arena keeps the memory it once held: an engine's RocksDB flush and compaction threads,
its shard loops, publishers and admin threads each grow one, so the process's RSS grew
with the work it had seen rather than with what it holds. ``limit_malloc_arenas`` caps
them at ``ARENAS`` (``mallopt(M_ARENA_MAX)``) before the process starts a thread; most of
an engine's work holds the GIL, so its threads hardly ever contend for an arena.

An operator's own ``MALLOC_ARENA_MAX`` (or ``glibc.malloc.arena_max`` in
``GLIBC_TUNABLES``) is left as it is; on a C library without ``mallopt`` nothing changes.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from typing import Final

M_ARENA_MAX: Final = -8  # glibc's malloc.h
ARENAS: Final = 2


def operator_chose(environ: Mapping[str, str]) -> bool:
    """Whether the environment already sets the arena limit."""
    return ("MALLOC_ARENA_MAX" in environ
            or "glibc.malloc.arena_max" in environ.get("GLIBC_TUNABLES", ""))


def limit_malloc_arenas(arenas: int = ARENAS, *,
                        environ: Mapping[str, str] = os.environ) -> bool:
    """Cap this process's malloc arenas at ``arenas``; whether the cap was set (module
    docstring). Call it before the process starts a thread."""
    if operator_chose(environ):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
