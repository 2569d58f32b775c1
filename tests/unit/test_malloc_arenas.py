"""An engine process caps glibc's malloc arenas (``nereus.adapters.malloc_arenas``)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from nereus.adapters.malloc_arenas import limit_malloc_arenas, operator_chose

# a child that (maybe) caps its arenas, then starts 8 threads that each malloc below the
# mmap threshold and keep it, and prints how many heaps glibc's malloc_info reports
CHILD = textwrap.dedent("""
    import ctypes, re, sys, tempfile, threading
    from nereus.adapters.malloc_arenas import limit_malloc_arenas
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


def heaps(mode: str) -> int:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    done = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return int(done.stdout)


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
