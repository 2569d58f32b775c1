"""Which catalogued checkpoints ``nereus checkpoint prune`` may delete.

The operator asks to keep the newest ``keep``; the Recovery Set (the newest
``recovery_keep``, ``[checkpoints] keep`` in nereus.toml) is kept whatever they ask, and a
member they asked to delete is *refused*, with the reason. Deleting a checkpoint outside
the Recovery Set never moves the Recovery Floor (the floor is computed from members only)
and deletes no payload object (those belong to ``payload gc``), so nothing recovery needs
can go.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nereus.checkpoint.manifest import CatalogEntry


@dataclass(frozen=True, slots=True)
class Refusal:
    entry: CatalogEntry
    reason: str


@dataclass(frozen=True, slots=True)
class PrunePlan:
    kept: tuple[CatalogEntry, ...]  # everything that stays, refused ones included
    deleted: tuple[CatalogEntry, ...]
    refused: tuple[Refusal, ...]


def plan_prune(entries: Sequence[CatalogEntry], *, keep: int, recovery_keep: int) -> PrunePlan:
    """Split ``entries`` (the catalog, oldest first) into kept, deleted and refused."""
    if keep < 1 or recovery_keep < 1:
        raise ValueError("keep and recovery_keep are at least 1")
    wanted = {e.checkpoint_id for e in entries[-keep:]}
    members = {e.checkpoint_id for e in entries[-recovery_keep:]}
    kept: list[CatalogEntry] = []
    deleted: list[CatalogEntry] = []
    refused: list[Refusal] = []
    for entry in entries:
        if entry.checkpoint_id in wanted:
            kept.append(entry)
        elif entry.checkpoint_id in members:
            kept.append(entry)
            refused.append(Refusal(entry, f"a member of the Recovery Set (the newest "
                                          f"{recovery_keep}, [checkpoints] keep)"))
        else:
            deleted.append(entry)
    return PrunePlan(tuple(kept), tuple(deleted), tuple(refused))
