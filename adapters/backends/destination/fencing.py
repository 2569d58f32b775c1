"""Destinations that can fence a shard's previous writer, so that absence becomes proof.

Seed 000 §4: a lost response is never called NOT_PUBLISHED merely because the target
appears empty — the old writer might still write. A destination that can *fence* the old
writer removes that "might": once the new owner holds what the old writer needed to write
(a file lane's per-shard writer lock), nothing the old writer began can land any more, and
an orphan attempt absent from what the destination holds is proven NOT_PUBLISHED.

``fence`` runs in a shard owner's recovery, before any of its own sends, for every lane
whose destination implements it: it takes the shard's writer fence for this owner, makes
what the destination holds durable, and classifies each orphan (PUBLISHING after the old
owner died) exactly: ``Fenced.found`` (PUBLISHED, with its record) or absent (NOT_PUBLISHED
with ``Fenced.absent`` as its evidence). When it cannot prove anything it raises
``NotFenced`` saying why, and the orphans stay UNKNOWN as before. ``release`` gives the
fence up once the shard has been let go (a planned move), so the next owner can take it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from nereus.evidence_mac import ExpectedMac

FENCED_ABSENCE = "fenced absence"
"""The evidence kind of a NOT_PUBLISHED proven by fencing (the first words of its evidence)."""


class NotFenced(Exception):
    """The fence could not be taken or its proof does not hold; the message says why."""


@dataclass(frozen=True, slots=True)
class Fenced:
    """What a fence proved: each found attempt's record; every other attempt asked about
    is absent, with ``absent`` as its evidence."""

    found: dict[str, str]
    absent: str


@runtime_checkable
class Fencing(Protocol):
    def fence(self, shard: str, wanted: Mapping[str, ExpectedMac], since_ms: int) -> Fenced:
        """Take ``shard``'s writer fence for this owner, and classify ``wanted`` (attempt
        id -> the evidence MAC its record carries), all admitted at ``since_ms`` or later.
        Raises ``NotFenced``."""
        ...

    def release(self, shard: str) -> None:
        """Give ``shard``'s writer fence up (its loop has ended; nothing more is sent)."""
        ...


def absent_evidence(kind: str, how: str) -> str:
    """The evidence of an attempt proven absent: its kind first, then how it was proven."""
    return f"{FENCED_ABSENCE} ({kind}): {how}"
