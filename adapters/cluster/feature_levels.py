"""The cluster's feature level in its coordinator (``feature-level``, ``nereus.features``).

A joining node writes its member record (with the level its build supports) and *then*
reads the level, refusing to join below it. ``raise_level`` reads the nodes that own or may
own a shard (live members, owners, placements), refuses while one supports less, writes the
level by CAS and *then* reads the members again: a node whose member record it sees only
then joined while the level was being raised, and is named in ``late`` (it either saw the
new level and left, or must be stopped by the operator; ``upgrade status`` shows it).
0.1.0 nodes know no levels: the level is also written into the cluster's configuration as
``[features] level = N`` (``guard_config``), a table 0.1.0 refuses, so such a node does not
start once the level is raised.
"""

from __future__ import annotations

from dataclasses import dataclass

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.cluster import keys
from nereus.cluster.records import FeatureLevel, Member, decode_record, encode_record
from nereus.coordination.errors import KeyNotFound, UnexpectedVersionId
from nereus.coordination.records import EXPECTED_RECORD_DOES_NOT_EXIST
from nereus.features import (
    BASE_LEVEL,
    FeatureLevelError,
    check_can_run,
    finalize_blockers,
    with_features,
)

_CONFIG_TRIES = 5


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
    guard_config(store, target, operator=operator, reason=reason, now_ms=now_ms)
    late = [node for node, member in sorted(store.members().items())
            if member.feature_level < target]
    return record, late


def guard_config(store: ClusterStore, level: int, *, operator: str, reason: str,
                 now_ms: int) -> None:
    """Write the level into the cluster's configuration too (``[features]``, audited),
    which a 0.1.0 node refuses as an unknown table instead of joining below the level."""
    for _ in range(_CONFIG_TRIES):
        found = store.config()
        if found is None:
            return
        config, version = found
        toml = with_features(config.toml, level)
        if toml == config.toml:
            return
        try:
            store.write_config(toml, changed_by=operator, reason=reason, now_ms=now_ms,
                               expected=version, summary=f"[features] level = {level}")
            return
        except UnexpectedVersionId:
            continue  # changed meanwhile: again on the new text
    raise FeatureLevelError("the cluster's configuration kept changing: [features] not "
                            "written", hint="run `nereus upgrade finalize` again")
