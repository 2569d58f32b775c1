"""The records a cluster keeps in its coordinator, one msgspec Struct per kind of key
(``keys.py`` says where; the table is ``docs/ARCHITECTURE.md``, "Cluster").

``config`` (TOML, CAS on its version, each write leaving an ``AuditEntry``); ephemeral on a
session: ``nodes/<id>`` (``Member``), ``leader`` (``Leader``), ``owners/<shard>``
(``OwnerRecord``, created only when absent: its creator owns the shard), ``warm/<shard>``;
durable: ``placement/<shard>`` (the leader's, or pinned by ``shard move``),
``epochs/<shard>`` (``ShardEpoch``, the shard's fencing counter, +1 by CAS on every take, so
epochs grow whatever the store's own counter does), ``drains/<id>``, ``secrets/<route>``
(``RouteSecret``, the route's evidence key in plain text, create-only: level 1),
``sealed-keys/<route>`` (``SealedRouteKey``, the route's evidence keys sealed under the
nodes' sealing key, from feature level 2; each node opens them into its home),
``migrated`` and ``moved`` (``nereus cluster migrate``: no node starts or joins where
``moved`` is), ``feature-level`` (``FeatureLevel``: what the cluster may write).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

import msgspec


class Member(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """A live node: who it is, where its admin socket is, and how much it can hold."""

    node_id: str
    host: str
    address: str  # the admin socket (on ``host``)
    capacity: int = 1  # placement weight
    version: str = ""  # the software version (build) the node runs
    pid: int = 0
    started_ms: int = 0
    # the highest feature level its build supports (``nereus.features``); a 0.1.0 node
    # does not write it, and is read as level 1
    feature_level: int = 1


class FeatureLevel(msgspec.Struct, frozen=True, kw_only=True):
    """The cluster's feature level (``feature-level``; absent: level 1), raised by
    ``nereus upgrade finalize`` by CAS, never lowered."""

    level: int
    raised_by: str = ""
    reason: str = ""
    raised_ms: int = 0


class Leader(msgspec.Struct, frozen=True, kw_only=True):
    """The node that plans placement while its session lives."""

    node_id: str
    since_ms: int = 0


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    """Which node should own a shard, and why the leader (or an operator) said so."""

    shard: str
    node_id: str
    reason: str = ""
    pinned: bool = False  # an operator's move: kept while that node lives and is not drained
    operator: str = ""
    since_ms: int = 0


class OwnerState(StrEnum):
    """Where an owner is with its shard."""

    RECOVERING = "RECOVERING"  # holds the record; restoring, replaying, activating
    ACTIVE = "ACTIVE"  # live owner: claims and publishes
    RELEASING = "RELEASING"  # planned move: no new claims; outcomes, checkpoint, then gone
    # held, not run: its activation raised (``refused``) or its loop failed (a diverged or
    # corrupt log); ``detail`` says why. Its owner retries now and then; nobody else takes
    # it meanwhile (a move, ``nereus shard move``, makes the owner let it go)
    FAILED = "FAILED"


class OwnerRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The shard's current owner. ``epoch`` is the fencing epoch it took (``ShardEpoch``;
    0 in the very first write, before the owner has incremented the counter)."""

    shard: str
    node_id: str
    owner_id: str  # the engine's owner id in ACTIVATION_BARRIER
    state: OwnerState = OwnerState.RECOVERING
    epoch: int = 0
    since_ms: int = 0
    detail: str = ""
    # FAILED because opening the shard raised (a configuration that does not match its
    # data, a database that cannot be opened), as a single engine's start would: a
    # front door starting its workers refuses to start over it
    refused: bool = False


class ShardEpoch(msgspec.Struct, frozen=True, kw_only=True):
    """A shard's fencing epoch: the last one granted, to whom, and when. Every take
    increments it by CAS; it is never deleted (a later owner must go above it), and an
    owner that finds the shard's log already past it raises it (``ClusterStore.raise_epoch``)."""

    shard: str
    epoch: int
    node_id: str = ""
    owner_id: str = ""
    since_ms: int = 0


class Warm(msgspec.Struct, frozen=True, kw_only=True):
    """A planned move's target is ready to take the shard (ephemeral, on its session): its
    copy of the shard's state has caught up with the log (or it keeps none of its own), so
    taking it now replays only the tail. The old owner lets go once this says so."""

    shard: str
    node_id: str
    applied_position: int | None = None
    since_ms: int = 0


class ClusterConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The cluster's configuration: nereus.toml text without node-local tables."""

    toml: str
    revision: int = 1  # 1 for the first write, +1 per change
    changed_by: str = ""
    reason: str = ""
    changed_ms: int = 0


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One change of the cluster configuration (kept for ever under ``config-audit/``)."""

    revision: int
    changed_by: str
    reason: str
    changed_ms: int
    summary: str = ""


class Drain(msgspec.Struct, frozen=True, kw_only=True):
    """An operator's request that a node own no shard."""

    node_id: str
    operator: str
    reason: str
    since_ms: int = 0


class RouteSecret(msgspec.Struct, frozen=True, kw_only=True):
    """A route's evidence key (hex), shared by every node of the cluster."""

    route: str
    evidence_key: str  # hex, as in ``<home>/secrets/<route>.evidence-key``
    made_ms: int = 0
    made_by: str = ""


class SealedKey(msgspec.Struct, frozen=True, kw_only=True):
    """One generation of a route's evidence key, sealed (``adapters/cluster/evidence_seal.py``)."""

    generation: int  # 1 for the route's first key, +1 per rotation
    sealed: str  # base64: AES-GCM nonce, ciphertext and tag
    made_ms: int = 0
    made_by: str = ""


class SealedRouteKey(msgspec.Struct, frozen=True, kw_only=True):
    """A route's evidence keys, sealed (feature level 2; ``RouteSecret`` below it): the
    key evidence is signed with now and, until ``previous_until_ms``, the one before it,
    which still verifies evidence signed before the rotation (``nereus cluster
    rotate-evidence-key``, a CAS on the record's version)."""

    route: str
    key_id: str  # which sealing key sealed both (its fingerprint, never the key)
    current: SealedKey
    previous: SealedKey | None = None
    previous_until_ms: int = 0  # the previous key verifies until then
    reason: str = ""  # why the last rotation was made
    # the last change of sealing key (``nereus cluster reseal-evidence-keys``): when, by
    # whom and why its keys were sealed again under ``key_id``
    resealed_ms: int = 0
    resealed_by: str = ""
    reseal_reason: str = ""


class NodeKeys(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """Which keys a live node (a member: a worker of a node has its own) holds, as it last
    said (ephemeral on its session): the fingerprints of its sealing keys (the current one
    first, then the one before it while it is changed) and each route's evidence key
    generation it signs with. ``cluster status``/``nodes`` show it; ``doctor`` compares."""

    node_id: str
    seal_key_ids: list[str] = msgspec.field(default_factory=list)
    generations: dict[str, int] = msgspec.field(default_factory=dict)


class Migrated(msgspec.Struct, frozen=True, kw_only=True):
    """This copy of the cluster came from ``source`` (``nereus cluster migrate``): who
    copied it, why and when; ``done`` once every record is here (a copy that stopped
    part-way is this cluster's still, and the next migrate from ``source`` replaces it)."""

    source: str  # the coordinator URL it was copied from
    operator: str
    reason: str
    started_ms: int
    done: bool = False
    records: int = 0  # durable records copied
    epochs: int = 0  # shard epoch counters among them


class Moved(msgspec.Struct, frozen=True, kw_only=True):
    """The cluster moved to ``target``: its nodes join there (``nereus cluster rejoin``)."""

    target: str  # the coordinator URL it moved to
    operator: str
    reason: str
    moved_ms: int


R = TypeVar("R", bound=msgspec.Struct)

_ENCODER = msgspec.json.Encoder()


def encode_record(record: msgspec.Struct) -> bytes:
    """A record's bytes in the coordinator (JSON: readable with etcdctl)."""
    return _ENCODER.encode(record)


def decode_record(raw: bytes, kind: type[R]) -> R:
    """A record from its bytes; ``msgspec.ValidationError`` names the field at fault."""
    return msgspec.json.decode(raw, type=kind)
