"""A daemon and its worker processes as ``/proc`` shows them: their pids, CPU seconds and
resident memory (a thread or a process may end between listing and reading: skipped)."""

from __future__ import annotations

import os
from pathlib import Path


def tree_pids(pid: int) -> list[int]:
    """``pid`` and its children."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            pids += [int(p) for p in task.read_text().split()]
        except OSError:
            continue
    return pids


def tree_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and its children, with what their own children that ended
    took (cutime + cstime: a checkpoint's digest child, once waited for)."""
    ticks = 0
    for one in tree_pids(pid):
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(f) for f in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children, MB."""
    total_kb = 0
    for one in tree_pids(pid):
        try:
            status = Path(f"/proc/{one}/status").read_text()
        except OSError:
            continue
        total_kb += next((int(line.split()[1]) for line in status.splitlines()
                          if line.startswith("VmRSS:")), 0)
    return round(total_kb / 1024, 1)
