"""How an engine process's C allocator keeps memory (glibc's ``mallopt``).

Two settings, made by ``settle_malloc`` before the process starts a thread:

* **Arenas** (``limit_malloc_arenas``). glibc gives each thread that allocates an arena of
  its own, up to eight per core, and an arena keeps the memory it once held: an engine's
  RocksDB flush and compaction threads, its shard loops, publishers and admin threads each
  grow one, so the process's RSS grew with the work it had seen rather than with what it
  holds. They are capped at ``ARENAS``; most of an engine's work holds the GIL, so its
  threads hardly ever contend for an arena.
* **A fixed mmap threshold** (``fix_mmap_threshold``). glibc serves an allocation of at
  least the threshold (128 KiB at start) with a mapping of its own, returned to the kernel
  when freed, but it raises the threshold to the size of every mapped block freed, up to
  32 MiB. RocksDB's memtables are made of arena blocks of an eighth of the write buffer
  (megabytes), allocated while a memtable fills and freed when it is flushed: after the
  first flush the threshold sat above them, every later memtable came from the heap, and
  the heap kept the holes its flushed memtables left (glibc's ``mallinfo2``: 30-55 MB free
  inside each worker's heap during a fill). Setting the threshold turns the raising off:
  a memtable's blocks are mapped and given back whole at its flush (the heaps' free bytes
  0-10 MB). ``bench/scale.py --pending 10000000 --skip herd idle retention`` (4 shards, 2
  workers), two pairs against the threshold left to glibc: the engine's RSS at 1,000,000
  pending 330 -> 234 and 326 -> 244 MB, at 10,000,000 431 -> 324 and 435 -> 314 MB; the
  fill's rate and ``bench/fire.py``'s CPU per publish did not move beyond the runs'
  spread.

An operator's own choice in the environment (``MALLOC_ARENA_MAX``,
``MALLOC_MMAP_THRESHOLD_``, or the matching ``glibc.malloc.*`` in ``GLIBC_TUNABLES``)
stands; on a C library without ``mallopt`` nothing changes.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping
from typing import Final

M_MMAP_THRESHOLD: Final = -3  # glibc's malloc.h
M_ARENA_MAX: Final = -8
ARENAS: Final = 2
MMAP_THRESHOLD: Final = 128 * 1024  # glibc's own starting value, kept fixed

_ENVIRONMENT: Final = {M_ARENA_MAX: ("MALLOC_ARENA_MAX", "glibc.malloc.arena_max"),
                       M_MMAP_THRESHOLD: ("MALLOC_MMAP_THRESHOLD_",
                                          "glibc.malloc.mmap_threshold")}


def operator_chose(environ: Mapping[str, str], option: int = M_ARENA_MAX) -> bool:
    """Whether the environment already sets ``option`` (an ``M_*`` of malloc.h)."""
    variable, tunable = _ENVIRONMENT[option]
    return variable in environ or tunable in environ.get("GLIBC_TUNABLES", "")


def limit_malloc_arenas(arenas: int = ARENAS, *,
                        environ: Mapping[str, str] = os.environ) -> bool:
    """Cap this process's malloc arenas at ``arenas``; whether the cap was set (module
    docstring). Call it before the process starts a thread."""
    return _set(M_ARENA_MAX, arenas, environ)


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD, *,
                       environ: Mapping[str, str] = os.environ) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes, so that freeing a large block no
    longer raises it; whether it was set (module docstring)."""
    return _set(M_MMAP_THRESHOLD, threshold, environ)


def settle_malloc(*, environ: Mapping[str, str] = os.environ) -> None:
    """Both settings, for an engine process, before it starts a thread."""
    limit_malloc_arenas(environ=environ)
    fix_mmap_threshold(environ=environ)


def _set(option: int, value: int, environ: Mapping[str, str]) -> bool:
    if operator_chose(environ, option):
        return False
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(option, value))


def _mallopt() -> Callable[[int, int], int] | None:
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    found: Callable[[int, int], int] = mallopt
    return found
