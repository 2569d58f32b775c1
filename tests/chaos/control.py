"""The control file the chaos nemeses write and the chaos engine child reads: the engine
clock's offset from this host's clock, and each lane's destination fault.

The file is replaced atomically (write, rename); the child re-reads it at most every
``REFRESH_S``, so a change takes effect within that long. Faults:

* ``refuse``: every publish answers NOT_PUBLISHED RETRIABLE before any write, and the
  probe fails (a destination that is up and says no);
* ``slow``: each publish waits ``slow_ms`` first;
* ``hang``: publish, probe and evidence scan block until the fault is cleared, then go on
  (a call that hangs and completes late: its record may land after its attempt was
  recorded UNKNOWN);
* ``fail_after_write``: the publish is done, then its answer is lost (the adapter raises,
  as a connection reset after the write would): the publisher must record UNKNOWN.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

import msgspec

LaneFault = Literal["refuse", "slow", "hang", "fail_after_write"]
REFRESH_S = 0.02


class Control(msgspec.Struct, frozen=True, kw_only=True):
    clock_offset_ms: int = 0
    lanes: dict[str, LaneFault] = msgspec.field(default_factory=dict)
    slow_ms: int = 1_500


def write_control(path: Path, control: Control) -> None:
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_bytes(msgspec.json.encode(control))
    os.replace(scratch, path)


def read_control(path: Path) -> Control:
    try:
        return msgspec.json.decode(path.read_bytes(), type=Control)
    except (OSError, msgspec.DecodeError):
        return Control()


class ControlReader:
    """The control file as the child sees it, re-read at most every ``REFRESH_S``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._value = read_control(path)
        self._at = time.monotonic()

    def get(self) -> Control:
        now = time.monotonic()
        if now - self._at >= REFRESH_S:
            self._value = read_control(self.path)
            self._at = now
        return self._value
