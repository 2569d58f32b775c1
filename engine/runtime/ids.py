"""Unique ids for an engine's claims, attempts and outcomes."""

from __future__ import annotations

import itertools
import uuid


class IdSource:
    """A random per-process prefix and a counter (a UUID per id cost three ``urandom``
    calls per published message)."""

    def __init__(self) -> None:
        self._prefix = uuid.uuid4().hex[:16]
        self._counter = itertools.count(1)

    def __call__(self) -> str:
        return f"{self._prefix}-{next(self._counter):x}"
