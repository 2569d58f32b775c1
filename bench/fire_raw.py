"""``bench/fire.py``'s raw baseline: the engine's own outbox lines, written and fsynced in
the same batches, without the engine.

Publishes/s depends on the machine (its fsyncs, its cores); the ratio of the engine's rate
to this one, measured in the same run on the same disk, compares across machines. A batch
is what one destination call wrote: the file destination stamps every line of a call with
one ``published_at``, so consecutive lines sharing it are one batch (two calls in the same
millisecond count as one: the raw side then has fewer fsyncs, never more). Each batch is
written as the destination writes it: open with ``O_APPEND``, write, fsync, close. The
disk is shared and its fsyncs vary from one second to the next, so the lines are written
``ROUNDS`` times (each to a fresh file) and the median round is the baseline.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import msgspec

_STAMP = b'"published_at":"'
ROUNDS = 3


class RawBaseline(msgspec.Struct, frozen=True):
    lines: int
    batches: int
    mean_batch: float
    seconds: float  # the median round's
    rate_per_s: int
    rounds_s: list[float]


def batches(outbox: bytes) -> list[bytes]:
    """The outbox's lines in the batches they were written in (by ``published_at``)."""
    out: list[bytes] = []
    current: list[bytes] = []
    stamp = b""
    for line in outbox.splitlines(keepends=True):
        at = line.find(_STAMP)
        mine = line[at:at + len(_STAMP) + 24] if at >= 0 else b""
        if current and mine != stamp:
            out.append(b"".join(current))
            current = []
        stamp = mine
        current.append(line)
    if current:
        out.append(b"".join(current))
    return out


def raw_baseline(outbox: Path, scratch: Path) -> RawBaseline:
    """Write ``outbox``'s lines again to ``scratch`` in the same batches, each fsynced;
    the median of ``ROUNDS`` rounds."""
    groups = batches(outbox.read_bytes())
    lines = sum(group.count(b"\n") for group in groups)
    rounds = sorted(_round(groups, scratch) for _ in range(ROUNDS))
    seconds = max(rounds[len(rounds) // 2], 1e-9)
    return RawBaseline(lines=lines, batches=len(groups),
                       mean_batch=round(lines / max(len(groups), 1), 1),
                       seconds=round(seconds, 3), rate_per_s=round(lines / seconds),
                       rounds_s=[round(r, 3) for r in rounds])


def _round(groups: list[bytes], scratch: Path) -> float:
    """Seconds to write ``groups`` to a fresh ``scratch``, each group written and fsynced."""
    began = time.perf_counter()
    for data in groups:
        fd = os.open(scratch, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
    seconds = time.perf_counter() - began
    scratch.unlink()
    return seconds
