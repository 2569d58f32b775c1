"""A route's evidence keys sealed in the coordinator (``sealed-keys/<route>``,
``SealedRouteKey``; feature level 2), and their rotation.

A sealed record is made create-only by the first node that needs it (a second writer reads
the first's), from the route's plain-text key when the cluster had one (level 1: that
record is then deleted, so the coordinator keeps no plain key), else fresh. A rotation
replaces it by CAS on the version read: the new key becomes ``current``, the old one
``previous`` until the grace ends. A rotation while a grace runs is refused: it would drop
a key that evidence in flight may still carry. A re-seal (a new sealing key) replaces it by
CAS too, with the same keys sealed under the new sealing key: evidence is untouched.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass

import msgspec

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.evidence_seal import SealKey, seal, unseal
from nereus.cluster import keys
from nereus.cluster.records import (
    NodeKeys,
    SealedKey,
    SealedRouteKey,
    decode_record,
    encode_record,
)
from nereus.coordination.errors import KeyNotFound, UnexpectedVersionId
from nereus.coordination.protocol import Session
from nereus.coordination.records import EXPECTED_RECORD_DOES_NOT_EXIST, prefix_range
from nereus.errors import ExitCode, NereusError
from nereus.evidence_mac import EvidenceKeys


class RotationRefused(NereusError):
    """A rotation that cannot be made now (the answer is no, exit 1)."""

    exit_code = ExitCode.NO


@dataclass(frozen=True, slots=True)
class Sealed:
    """A sealed record as read, with the version a rotation compares against."""

    record: SealedRouteKey
    version_id: int


def read_sealed(store: ClusterStore, route: str) -> Sealed | None:
    try:
        found = store.handle.coordinator.get(store.key(keys.sealed_key_key(route)))
    except KeyNotFound:
        return None
    return Sealed(decode_record(found.value, SealedRouteKey), found.version.version_id)


def sealed_routes(store: ClusterStore) -> dict[str, SealedRouteKey]:
    """Every route's sealed record."""
    low, high = prefix_range(store.key(keys.SEALED_KEYS))
    return {r.key.rpartition("/")[2]: decode_record(r.value, SealedRouteKey)
            for r in store.handle.coordinator.range_scan(low, high)}


def node_key_reports(store: ClusterStore) -> dict[str, NodeKeys]:
    """Which keys each live node (member) said it holds."""
    low, high = prefix_range(store.key(keys.NODE_KEYS))
    return {r.key.rpartition("/")[2]: decode_record(r.value, NodeKeys)
            for r in store.handle.coordinator.range_scan(low, high)}


def report_node_keys(store: ClusterStore, session: Session, report: NodeKeys) -> None:
    """Say which keys this node holds (gone with its session)."""
    store.handle.coordinator.put(store.key(keys.node_keys_key(report.node_id)),
                                 encode_record(report), ephemeral=session)


def _sealed(seal_key: SealKey, route: str, key: bytes, generation: int, *, now_ms: int,
            made_by: str) -> SealedKey:
    return SealedKey(generation=generation, made_ms=now_ms, made_by=made_by,
                     sealed=seal(seal_key, key, route=route,
                                 generation=generation))


def seal_route(store: ClusterStore, route: str, key: bytes, seal_key: SealKey, *,
               now_ms: int, made_by: str) -> bool:
    """Keep ``key`` sealed as the route's first key unless it has a sealed one already
    (whether it was made now); then the route's plain-text record, if any, is deleted."""
    record = SealedRouteKey(route=route, key_id=seal_key.key_id, current=_sealed(
        seal_key, route, key, 1, now_ms=now_ms, made_by=made_by))
    try:
        store.handle.coordinator.put(store.key(keys.sealed_key_key(route)),
                                     encode_record(record),
                                     expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST)
        made = True
    except UnexpectedVersionId:
        made = False
    forget_plain_key(store, route)
    return made


def forget_plain_key(store: ClusterStore, route: str) -> None:
    """Delete the route's plain-text key record (its key is kept sealed now)."""
    with contextlib.suppress(KeyNotFound):
        store.handle.coordinator.delete(store.key(keys.secret_key(route)))


def open_route_keys(record: SealedRouteKey, seal_key: SealKey) -> EvidenceKeys:
    """The route's evidence keys, opened with this node's sealing key."""
    def opened(key: SealedKey) -> bytes:
        return unseal(seal_key, key.sealed, key_id=record.key_id,
                      route=record.route, generation=key.generation)

    return EvidenceKeys(current=opened(record.current), generation=record.current.generation,
                        previous=None if record.previous is None else opened(record.previous),
                        previous_until_ms=record.previous_until_ms)


def refuse_during_grace(record: SealedRouteKey, now_ms: int) -> None:
    """``RotationRefused`` while the previous key still verifies (a rotation now would
    drop it)."""
    from nereus.timespec import format_time_ms

    if record.previous is not None and record.previous_until_ms > now_ms:
        raise RotationRefused(
            f"route {record.route}: evidence signed before the last rotation verifies until "
            f"{format_time_ms(record.previous_until_ms)}; rotating now would drop that key",
            hint="rotate again once that grace has ended")


def rotate(store: ClusterStore, route: str, seal_key: SealKey, *, now_ms: int, grace_ms: int,
           operator: str, reason: str) -> SealedRouteKey:
    """Make the route a new evidence key; the old one verifies for ``grace_ms`` more.
    ``RotationRefused`` while the previous rotation's grace runs, or when the record
    changed meanwhile (nothing written either way)."""
    found = read_sealed(store, route)
    if found is None:
        raise RotationRefused(f"route {route} has no sealed evidence key in the cluster yet",
                              hint="start a node that holds the sealing key first (it seals "
                                   "the route's key)")
    was = found.record
    refuse_during_grace(was, now_ms)
    old = open_route_keys(was, seal_key)
    generation = was.current.generation + 1
    record = SealedRouteKey(
        route=route, key_id=seal_key.key_id, reason=reason,
        current=_sealed(seal_key, route, secrets.token_bytes(32), generation,
                        now_ms=now_ms, made_by=operator),
        previous=_sealed(seal_key, route, old.current, was.current.generation,
                         now_ms=was.current.made_ms, made_by=was.current.made_by),
        previous_until_ms=now_ms + grace_ms)
    try:
        store.handle.coordinator.put(store.key(keys.sealed_key_key(route)),
                                     encode_record(record),
                                     expected_version_id=found.version_id)
    except UnexpectedVersionId:
        raise RotationRefused(f"route {route}'s evidence key changed while this ran; "
                              "nothing was written", hint="run it again") from None
    return record


def reseal(store: ClusterStore, found: Sealed, opened: EvidenceKeys, new_key: SealKey, *,
           now_ms: int, operator: str, reason: str) -> SealedRouteKey:
    """``found``'s evidence keys (``opened``) sealed again under ``new_key``: the
    same keys and generations, so evidence signed with them verifies as before.
    ``RotationRefused`` when the record changed since it was read (nothing written)."""
    was = found.record

    def again(key: SealedKey, raw: bytes) -> SealedKey:
        return msgspec.structs.replace(key, sealed=seal(new_key, raw, route=was.route,
                                                        generation=key.generation))

    record = msgspec.structs.replace(
        was, key_id=new_key.key_id, current=again(was.current, opened.current),
        previous=None if was.previous is None or opened.previous is None
        else again(was.previous, opened.previous),
        resealed_ms=now_ms, resealed_by=operator, reseal_reason=reason)
    try:
        store.handle.coordinator.put(store.key(keys.sealed_key_key(was.route)),
                                     encode_record(record), expected_version_id=found.version_id)
    except UnexpectedVersionId:
        raise RotationRefused(f"route {was.route}'s evidence key changed while this ran; it "
                              "was not re-sealed", hint="run it again") from None
    return record
