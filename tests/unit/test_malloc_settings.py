"""An engine process caps glibc's malloc arenas and fixes its mmap threshold
(``nereus.adapters.home.malloc_settings``)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from nereus.adapters.home.malloc_settings import (
    M_MMAP_THRESHOLD,
    fix_mmap_threshold,
    limit_malloc_arenas,
    operator_chose,
)

# a child that (maybe) caps its arenas, then starts 8 threads that each malloc below the
# mmap threshold and keep it, and prints how many heaps glibc's malloc_info reports
CHILD = textwrap.dedent("""
    import ctypes, re, sys, tempfile, threading
    from nereus.adapters.home.malloc_settings import limit_malloc_arenas
    if sys.argv[1] == "limit":
        assert limit_malloc_arenas(environ={})
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    ready = threading.Barrier(9)
    def grab():
        libc.malloc(4096)
        ready.wait()
        ready.wait()
    threads = [threading.Thread(target=grab) for _ in range(8)]
    for t in threads:
        t.start()
    ready.wait()
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    with tempfile.NamedTemporaryFile() as out:
        fp = libc.fopen(out.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        report = open(out.name).read()
    ready.wait()
    print(len(re.findall(r"<heap nr=", report)))
""")

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")


def child(script: str, mode: str, *, unset: tuple[str, ...]) -> int:
    """Run ``script`` with ``mode`` in a fresh interpreter without the ``unset``
    environment variables (an operator's own malloc settings); the number it prints."""
    env = {k: v for k, v in os.environ.items() if k not in (*unset, "GLIBC_TUNABLES")}
    done = subprocess.run([sys.executable, "-c", script, mode], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return int(done.stdout)


def heaps(mode: str) -> int:
    return child(CHILD, mode, unset=("MALLOC_ARENA_MAX",))


@glibc_only
def test_the_cap_keeps_eight_allocating_threads_in_two_arenas() -> None:
    """Uncapped, 8 threads that allocate get arenas of their own (more than 2 heaps); capped,
    glibc reports at most ``ARENAS`` (2)."""
    assert heaps("free") > 2
    assert heaps("limit") <= 2


def test_an_operators_own_limit_is_left_alone() -> None:
    """MALLOC_ARENA_MAX or a GLIBC_TUNABLES arena_max in the environment: nothing is set."""
    assert operator_chose({"MALLOC_ARENA_MAX": "4"})
    assert operator_chose({"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"})
    assert not operator_chose({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"})
    assert not limit_malloc_arenas(environ={"MALLOC_ARENA_MAX": "8"})


# a child that (maybe) fixes the mmap threshold, frees a mapped 8 MiB block (which raises
# glibc's threshold to 8 MiB unless it is fixed), then allocates 2 MiB and prints how many
# bytes of mapped blocks that added (glibc's mallinfo2 hblkhd)
MAPPED = textwrap.dedent("""
    import ctypes, sys
    from nereus.adapters.home.malloc_settings import fix_mmap_threshold
    if sys.argv[1] == "fix":
        assert fix_mmap_threshold(environ={})
    class Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Info
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(8 << 20))
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(2 << 20)
    print(libc.mallinfo2().hblkhd - before)
    libc.free(block)
""")


def mapped_bytes(mode: str) -> int:
    return child(MAPPED, mode, unset=("MALLOC_MMAP_THRESHOLD_",))


@glibc_only
def test_a_fixed_threshold_maps_a_large_block_after_a_larger_one_was_freed() -> None:
    """Left to itself glibc raises its threshold when a mapped 8 MiB block is freed, so a
    2 MiB block then comes from the heap (no mapped bytes added); with the threshold fixed
    the 2 MiB block is mapped, and given back whole when freed."""
    assert mapped_bytes("free") == 0
    assert mapped_bytes("fix") >= 2 << 20


def test_an_operators_own_threshold_is_left_alone() -> None:
    """MALLOC_MMAP_THRESHOLD_ or a GLIBC_TUNABLES mmap_threshold: nothing is set; an arena
    limit alone does not count as a threshold."""
    assert operator_chose({"MALLOC_MMAP_THRESHOLD_": "65536"}, M_MMAP_THRESHOLD)
    assert operator_chose({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"},
                          M_MMAP_THRESHOLD)
    assert not operator_chose({"MALLOC_ARENA_MAX": "2"}, M_MMAP_THRESHOLD)
    assert not fix_mmap_threshold(environ={"MALLOC_MMAP_THRESHOLD_": "65536"})
