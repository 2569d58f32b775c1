"""The cluster's feature level in its coordinator (``feature-level``, ``nereus.features``).

A joining node writes its member record (with the level its build supports) and *then*
reads the level, refusing to join below it. ``raise_level`` reads the nodes that own or may
own a shard (live members, owners, placements), refuses while one supports less, writes the
level by CAS and *then* reads the members again: a node whose member record it sees only
then joined while the level was being raised, and is named in ``late`` (it either saw the
new level and left, or must be stopped by the operator; ``upgrade status`` shows it).
"""

from __future__ import annotations

from dataclasses import dataclass

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.cluster import keys
from nereus.cluster.records import FeatureLevel, Member, decode_record, encode_record
from nereus.coordination.errors import KeyNotFound
from nereus.coordination.records import EXPECTED_RECORD_DOES_NOT_EXIST
from nereus.features import BASE_LEVEL, FeatureLevelError, check_can_run, finalize_blockers


@dataclass(frozen=True, slots=True)
class LevelRead:
    """The level in force and the version of its record (None: never raised)."""

    level: FeatureLevel
    version_id: int | None


def read_level(store: ClusterStore) -> LevelRead:
    """The cluster's feature level (``BASE_LEVEL`` when it was never raised)."""
    try:
        record = store.handle.coordinator.get(store.key(keys.FEATURE_LEVEL))
    except KeyNotFound:
        return LevelRead(FeatureLevel(level=BASE_LEVEL), None)
    return LevelRead(decode_record(record.value, FeatureLevel), record.version.version_id)


def node_levels(store: ClusterStore) -> dict[str, int]:
    """Every node that owns or may own a shard, with the level its build supports: live
    members as they report it; a node named by an ownership record or a placement and not
    live is counted at ``BASE_LEVEL`` (its build is not known)."""
    members: dict[str, Member] = store.members()
    levels = {node: member.feature_level for node, member in members.items()}
    named = {owned.record.node_id for owned in store.owners().values()}
    named |= {placement.node_id for placement, _ in store.placements().values()}
    for node in named - levels.keys():
        levels[node] = BASE_LEVEL
    return levels


def refuse_below_level(store: ClusterStore, member: Member) -> None:
    """Raise ``FeatureLevelError`` naming the node's build and the cluster's level when
    its build supports less than the level in force (read after its member record)."""
    level = read_level(store).level.level
    check_can_run(level=level, supported=member.feature_level, build=member.version,
                  who=f"node {member.node_id}")


def raise_level(store: ClusterStore, target: int, *, operator: str, reason: str,
                now_ms: int) -> tuple[FeatureLevel, list[str]]:
    """Write level ``target`` by CAS once every node supports it; ``FeatureLevelError``
    naming each node that does not (nothing written), or when it would lower the level.
    Returns the record and the nodes below it seen only after the write (module docstring)."""
    current = read_level(store)
    if target < current.level.level:
        raise FeatureLevelError(f"the cluster is at feature level {current.level.level}; "
                                f"a level is never lowered (asked for {target})")
    blockers = finalize_blockers(target, node_levels(store))
    if blockers:
        raise FeatureLevelError("cannot raise the feature level to "
                                f"{target}: " + "; ".join(blockers),
                                hint="upgrade those nodes (or move their shards away) first")
    record = FeatureLevel(level=target, raised_by=operator, reason=reason, raised_ms=now_ms)
    expected = current.version_id
    store.handle.coordinator.put(
        store.key(keys.FEATURE_LEVEL), encode_record(record),
        expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST if expected is None else expected)
    late = [node for node, member in sorted(store.members().items())
            if member.feature_level < target]
    return record, late
