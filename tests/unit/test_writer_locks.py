"""A file lane's writer lock keeps the outbox identity its holder recorded, even when the
holder dies in the middle of updating it (``adapters/backends/destination/writer_locks``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.backends.destination.writer_locks import WriterLocks


class _Died(BaseException):
    """The holder killed after one system call of its update."""


def test_a_holder_killed_mid_note_leaves_an_identity_the_next_taker_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The holder dies after the first system call of a note (after a publish): the next
    taker still reads an identity of the outbox, the old one or the new one (before: the
    note emptied the lock file first, so a kill there left nothing, and every in-flight
    attempt stayed UNCERTAIN: "no earlier writer of this shard recorded the outbox")."""
    outbox = tmp_path / "outbox.jsonl"
    outbox.write_bytes(b"")
    holder = WriterLocks(outbox)
    assert holder.take("default.0") is None
    outbox.write_bytes(b'{"line": 1}\n')
    calls = 0

    def dies_after_one(real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: Any) -> object:
            nonlocal calls
            calls += 1
            if calls > 1:
                raise _Died
            return real(*args)
        return call

    monkeypatch.setattr(os, "ftruncate", dies_after_one(os.ftruncate))
    monkeypatch.setattr(os, "pwrite", dies_after_one(os.pwrite))
    with pytest.raises(_Died):
        holder.note({"default.0"})
    monkeypatch.undo()
    holder.close()  # the kernel drops the dead holder's lock
    taker = WriterLocks(outbox)
    assert taker.take("default.0") is None
    assert taker.continuity("default.0") is None
    taker.close()
