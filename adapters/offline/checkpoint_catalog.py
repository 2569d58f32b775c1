"""The catalog of a shard's checkpoints, and the Recovery Set and Recovery Floor drawn from it.

Catalog: one entry per uploaded checkpoint (written last by an upload, deleted first by a
delete), so an entry always points at a complete checkpoint.

Recovery Set: the newest ``keep`` catalogued checkpoints of a shard, the only ones recovery
may use. Recovery Floor: the oldest Shard Log position any member still needs (its applied
position + 1), every external object any member references and every checkpoint object a
member's image needs (an incremental checkpoint's borrowed files, wherever held). Log
retention, payload collection and checkpoint deletion must stay below the floor
(``check_floor``); deleting a checkpoint removes only the objects no remaining checkpoint
names (``nereus.checkpoint.incremental.deletable``).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from nereus.adapters.backends.objectstore.protocol import ObjectMissing, ObjectStore
from nereus.checkpoint.incremental import deletable, named_keys
from nereus.checkpoint.manifest import (
    CatalogEntry,
    Manifest,
    catalog_key,
    catalog_prefix,
    checkpoint_prefix,
)
from nereus.errors import NereusError, NotFound
from nereus.shard import ShardId


class FloorViolation(NereusError):
    """An action would delete what a Recovery Set member still needs."""


@dataclass(frozen=True, slots=True)
class Floor:
    shard: str
    position: int  # the oldest log position a member still needs
    external_objects: frozenset[str]
    members: tuple[CatalogEntry, ...]
    # every checkpoint object (files wherever held, manifests) a member's image needs
    checkpoint_objects: frozenset[str] = frozenset()


def catalog(objects: ObjectStore, shard: ShardId) -> list[CatalogEntry]:
    """Catalogued checkpoints of ``shard``, oldest first (by applied position, then time)."""
    entries = []
    for info in objects.list(catalog_prefix(shard.route, shard.partition)):
        if info.key.endswith(".json"):
            entries.append(msgspec.json.decode(objects.get_bytes(info.key), type=CatalogEntry))
    entries.sort(key=lambda e: (-1 if e.applied_position is None else e.applied_position,
                                e.created_at_ms))
    return entries


def find(objects: ObjectStore, checkpoint_id: str) -> CatalogEntry:
    for info in objects.list("catalog/"):
        if info.key.endswith(f"/{checkpoint_id}.json"):
            return msgspec.json.decode(objects.get_bytes(info.key), type=CatalogEntry)
    raise NotFound(f"no checkpoint {checkpoint_id} in the catalog of {objects.description}",
                   hint="`nereus checkpoint list SHARD` lists them")


def manifest_of(objects: ObjectStore, entry: CatalogEntry) -> Manifest:
    """The manifest of a catalogued checkpoint, read from the store."""
    return msgspec.json.decode(objects.get_bytes(entry.manifest_key), type=Manifest)


def recovery_floor(objects: ObjectStore, shard: ShardId, keep: int) -> Floor:
    members = tuple(catalog(objects, shard)[-keep:]) if keep > 0 else ()
    position = 0
    external: set[str] = set()
    manifests = [manifest_of(objects, member) for member in members]
    if members:
        positions = [m.applied_position for m in members]
        position = min(-1 if p is None else p for p in positions) + 1
        for manifest in manifests:
            external.update(manifest.external_objects)
    return Floor(str(shard), position, frozenset(external), members, named_keys(manifests))


def check_floor(floor: Floor, *, delete_before: int | None = None,
                delete_objects: frozenset[str] = frozenset()) -> None:
    """Refuse to delete log records or objects a Recovery Set member still needs."""
    if delete_before is not None and delete_before > floor.position:
        needing = [m.checkpoint_id for m in floor.members
                   if (m.applied_position or -1) + 1 < delete_before]
        raise FloorViolation(
            f"deleting the log of {floor.shard} before position {delete_before} would cross the "
            f"Recovery Floor at {floor.position} (needed by {', '.join(needing) or 'replay'})",
            hint="take a newer checkpoint first, or delete only before the floor",
        )
    crossing = sorted(delete_objects & (floor.external_objects | floor.checkpoint_objects))
    if crossing:
        raise FloorViolation(
            f"objects still referenced by the Recovery Set of {floor.shard}: "
            f"{', '.join(crossing[:5])}" + (" ..." if len(crossing) > 5 else ""),
        )


def delete_checkpoint(objects: ObjectStore, entry: CatalogEntry, floor: Floor) -> int:
    """Delete a catalogued checkpoint that is not in the Recovery Set: the catalog entry
    first (from then on nothing points at it; a delete killed half-way leaves only
    harmless orphaned files), then its objects and those it borrowed, except what another
    catalogued checkpoint still names (a later incremental one's files stay where they
    are). Returns how many objects went."""
    if any(m.checkpoint_id == entry.checkpoint_id for m in floor.members):
        raise FloorViolation(f"checkpoint {entry.checkpoint_id} is a member of the Recovery "
                             f"Set of {floor.shard}: it is never deleted")
    prefix = checkpoint_prefix(entry.route, entry.partition, entry.checkpoint_id)
    others = [manifest_of(objects, other)
              for other in catalog(objects, ShardId(entry.route, entry.partition))
              if other.checkpoint_id != entry.checkpoint_id]
    doomed = _manifest_if_present(objects, entry)
    keys = deletable(doomed, (info.key for info in objects.list(prefix)), named_keys(others))
    check_floor(floor, delete_objects=frozenset(keys))
    objects.delete(catalog_key(entry.route, entry.partition, entry.checkpoint_id))
    for key in keys:  # manifest last
        objects.delete(key)
    return len(keys) + 1


def _manifest_if_present(objects: ObjectStore, entry: CatalogEntry) -> Manifest | None:
    """Its manifest, or None when it is gone (a delete killed after the manifest went)."""
    try:
        return manifest_of(objects, entry)
    except ObjectMissing:
        return None
