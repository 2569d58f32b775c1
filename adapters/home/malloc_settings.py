"""How an engine process's C allocator keeps memory (glibc's ``mallopt``), set by
``settle_malloc`` before the process starts a thread.

* Arenas are capped at ``ARENAS``: glibc grows one per allocating thread and an arena keeps
  what it once held, so RSS tracked the work seen, not what is held; most of an engine's
  work holds the GIL, so its threads hardly contend for one.
* The mmap threshold is fixed (128 KiB): glibc raises it above RocksDB's memtable blocks
  after the first flush, after which memtables came from the heap and left holes in it;
  fixed, a memtable's blocks are mapped and given back whole at its flush.

An operator's ``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_`` or ``GLIBC_TUNABLES`` stands;
without ``mallopt`` nothing changes. Figures: ``docs/decisions/0006-one-memory-budget.md``.
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
