"""The cluster's records in its coordinator, typed (``nereus.cluster.records``).

Every write that must not race is a compare-and-set: the configuration on its version,
membership and ownership by creating an absent key on the writer's session, a placement on
the version the leader read, a shard's epoch counter on the version its owner read.
``snapshot`` reads everything at once for status. A take creates the ownership record,
then increments ``epochs/<shard>`` by CAS: the new epoch depends on no store-wide counter,
so it keeps growing on another coordinator or a restored one. A counter not there yet
starts at the version that created the ownership record; an owner whose log applied an
epoch at or above its own raises the counter (``raise_epoch``) and takes the shard again
(``docs/decisions/0018-shard-epoch-counter.md``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from nereus.adapters.cluster.coordinator_url import ClusterHandle
from nereus.cluster import keys
from nereus.cluster.errors import ClusterMoved, ClusterNotInitialised, NodeIdInUse
from nereus.cluster.records import (
    AuditEntry,
    ClusterConfig,
    Drain,
    Leader,
    Member,
    Migrated,
    Moved,
    OwnerRecord,
    OwnerState,
    Placement,
    R,
    RouteSecret,
    ShardEpoch,
    Warm,
    decode_record,
    encode_record,
)
from nereus.coordination.errors import CoordinationError, KeyNotFound, UnexpectedVersionId
from nereus.coordination.protocol import Session
from nereus.coordination.records import EXPECTED_RECORD_DOES_NOT_EXIST, Version, prefix_range
from nereus.shard import ShardId

_CAS_TRIES = 10  # compare-and-set rounds on a shard's epoch counter before giving up


@dataclass(frozen=True, slots=True)
class Owned:
    """An ownership record as read."""

    record: OwnerRecord
    version: Version


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Everything the cluster's records say, read one kind after the other."""

    config: ClusterConfig | None
    members: dict[str, Member]
    leader: Leader | None
    placements: dict[ShardId, Placement]
    owners: dict[ShardId, OwnerRecord]
    drains: dict[str, Drain] = field(default_factory=dict)


class ClusterStore:
    """Typed access to one cluster's records."""

    def __init__(self, handle: ClusterHandle) -> None:
        self.handle = handle
        self._c = handle.coordinator
        self._root = handle.root

    @property
    def url(self) -> str:
        return self.handle.url

    def key(self, relative: str) -> str:
        return self._root + relative

    def watch_prefix(self) -> str:
        """The prefix under which every change of this cluster happens."""
        return self._root

    # reading ----------------------------------------------------------------------------
    def _get(self, relative: str, kind: type[R]) -> tuple[R, Version] | None:
        try:
            record = self._c.get(self.key(relative))
        except KeyNotFound:
            return None
        return decode_record(record.value, kind), record.version

    def _scan(self, prefix: str, kind: type[R]) -> dict[str, tuple[R, Version]]:
        low, high = prefix_range(self.key(prefix))
        cut = len(self.key(prefix))
        return {record.key[cut:]: (decode_record(record.value, kind), record.version)
                for record in self._c.range_scan(low, high)}

    # configuration ----------------------------------------------------------------------
    def config(self) -> tuple[ClusterConfig, Version] | None:
        return self._get(keys.CONFIG, ClusterConfig)

    def require_config(self) -> ClusterConfig:
        """The configuration of a cluster that lives here: ``ClusterNotInitialised`` when
        there is none, ``ClusterMoved`` when the cluster moved to another coordinator."""
        found = self.config()
        if found is None:
            raise ClusterNotInitialised(self.url)
        self.refuse_moved()
        return found[0]

    def moved(self) -> Moved | None:
        """Where the cluster moved to (``nereus cluster migrate``), if it did."""
        found = self._get(keys.MOVED, Moved)
        return None if found is None else found[0]

    def migrated(self) -> Migrated | None:
        """Where this copy of the cluster came from (``nereus cluster migrate``), if it
        was copied here."""
        found = self._get(keys.MIGRATED, Migrated)
        return None if found is None else found[0]

    def refuse_moved(self) -> None:
        """``ClusterMoved`` if the cluster moved to another coordinator."""
        moved = self.moved()
        if moved is not None:
            raise ClusterMoved(self.url, moved.target, moved.moved_ms)

    def write_config(self, toml: str, *, changed_by: str, reason: str, now_ms: int,
                     expected: Version | None, summary: str = "") -> ClusterConfig:
        """Write the configuration (create when ``expected`` is None); its audit entry
        follows. ``UnexpectedVersionId`` when someone changed it meanwhile."""
        current = self.config()
        revision = 1 if current is None else current[0].revision + 1
        record = ClusterConfig(toml=toml, revision=revision, changed_by=changed_by,
                               reason=reason, changed_ms=now_ms)
        self._c.put(self.key(keys.CONFIG), encode_record(record),
                    expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST if expected is None
                    else expected.version_id)
        self._c.put(self.key(keys.audit_key(revision)), encode_record(AuditEntry(
            revision=revision, changed_by=changed_by, reason=reason, changed_ms=now_ms,
            summary=summary)))
        return record

    def audit(self) -> list[AuditEntry]:
        return [entry for entry, _ in self._scan(keys.AUDIT, AuditEntry).values()]

    # members and leader -----------------------------------------------------------------
    def register(self, session: Session, member: Member) -> Version:
        """Make ``member`` live on ``session``; ``NodeIdInUse`` if its id is taken."""
        try:
            return self._c.put(self.key(keys.node_key(member.node_id)), encode_record(member),
                               expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST,
                               ephemeral=session)
        except UnexpectedVersionId:
            holder = self._get(keys.node_key(member.node_id), Member)
            where = "gone now" if holder is None else \
                f"{holder[0].host} pid {holder[0].pid}, admin {holder[0].address}"
            raise NodeIdInUse(member.node_id, where) from None

    def members(self) -> dict[str, Member]:
        return {node: member for node, (member, _) in self._scan(keys.NODES, Member).items()}

    def leader(self) -> Leader | None:
        found = self._get(keys.LEADER, Leader)
        return None if found is None else found[0]

    def try_lead(self, session: Session, node_id: str, *, now_ms: int) -> bool:
        """Become the leader if nobody is; whether this node is the leader now."""
        try:
            self._c.put(self.key(keys.LEADER), encode_record(Leader(node_id=node_id,
                                                                    since_ms=now_ms)),
                        expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST, ephemeral=session)
            return True
        except UnexpectedVersionId:
            leader = self.leader()
            return leader is not None and leader.node_id == node_id

    # placement and drains ---------------------------------------------------------------
    def placements(self) -> dict[ShardId, tuple[Placement, Version]]:
        return {keys.parse_segment(segment): found
                for segment, found in self._scan(keys.PLACEMENT, Placement).items()}

    def place(self, shard: ShardId, placement: Placement, *,
              expected: Version | None) -> None:
        """Write a placement by CAS on the version read (absent: ``expected`` None)."""
        self._c.put(self.key(keys.placement_key(shard)), encode_record(placement),
                    expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST if expected is None
                    else expected.version_id)

    def unplace(self, shard: ShardId, expected: Version) -> bool:
        """Delete a placement (a shard no longer configured) by CAS on the version read;
        False if it changed meanwhile."""
        try:
            return self._c.delete(self.key(keys.placement_key(shard)),
                                  expected_version_id=expected.version_id)
        except UnexpectedVersionId:
            return False

    def drains(self) -> dict[str, Drain]:
        return {node: drain for node, (drain, _) in self._scan(keys.DRAINS, Drain).items()}

    def drain(self, drain: Drain) -> None:
        self._c.put(self.key(keys.drain_key(drain.node_id)), encode_record(drain))

    def undrain(self, node_id: str) -> bool:
        return self._c.delete(self.key(keys.drain_key(node_id)))

    # route secrets ----------------------------------------------------------------------
    def route_secrets(self) -> dict[str, RouteSecret]:
        return {route: secret
                for route, (secret, _) in self._scan(keys.SECRETS, RouteSecret).items()}

    def add_route_secret(self, secret: RouteSecret) -> RouteSecret:
        """Keep ``secret`` unless the route has one already: the one kept (a route's key
        never changes, or the evidence signed with it would no longer verify)."""
        try:
            self._c.put(self.key(keys.secret_key(secret.route)), encode_record(secret),
                        expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST)
            return secret
        except UnexpectedVersionId:
            found = self._get(keys.secret_key(secret.route), RouteSecret)
            assert found is not None  # a route's secret is never deleted
            return found[0]

    # ownership --------------------------------------------------------------------------
    def owners(self) -> dict[ShardId, Owned]:
        return {keys.parse_segment(segment): Owned(record, version)
                for segment, (record, version) in self._scan(keys.OWNERS, OwnerRecord).items()}

    def take(self, session: Session, shard: ShardId, *, node_id: str, owner_id: str,
             now_ms: int) -> Owned | None:
        """Create the shard's ownership record on ``session`` if nobody holds it, then
        take the next epoch (module docstring); the record, or None when it is held. If
        the epoch cannot be taken, the record is deleted again and the error raised."""
        record = OwnerRecord(shard=keys.shard_segment(shard), node_id=node_id,
                             owner_id=owner_id, since_ms=now_ms)
        try:
            created = self._c.put(self.key(keys.owner_key(shard)), encode_record(record),
                                  expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST,
                                  ephemeral=session)
        except UnexpectedVersionId:
            return None
        owned = Owned(record, created)
        try:
            epoch = self._next_epoch(shard, first=created.version_id, node_id=node_id,
                                     owner_id=owner_id, now_ms=now_ms)
            return self.update_owner(session, shard, owned, epoch=epoch,
                                     state=OwnerState.RECOVERING)
        except BaseException:
            with contextlib.suppress(CoordinationError):
                self.release(shard, owned)
            raise

    def epochs(self) -> dict[ShardId, ShardEpoch]:
        """Each shard's epoch counter (the last epoch granted)."""
        return {keys.parse_segment(segment): found
                for segment, (found, _) in self._scan(keys.EPOCHS, ShardEpoch).items()}

    def _next_epoch(self, shard: ShardId, *, first: int, node_id: str, owner_id: str,
                    now_ms: int) -> int:
        """Increment the shard's counter by CAS (``first`` when it has none); the new
        epoch. Only the ownership record's holder calls it, so a conflict is rare (a
        ``raise_epoch`` meanwhile): read again and retry."""
        for _ in range(_CAS_TRIES):
            found = self._get(keys.epoch_key(shard), ShardEpoch)
            epoch = first if found is None else found[0].epoch + 1
            try:
                self._c.put(self.key(keys.epoch_key(shard)), encode_record(ShardEpoch(
                    shard=keys.shard_segment(shard), epoch=epoch, node_id=node_id,
                    owner_id=owner_id, since_ms=now_ms)),
                    expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST if found is None
                    else found[1].version_id)
            except UnexpectedVersionId:
                continue
            return epoch
        raise CoordinationError(f"{shard}: its epoch counter changed {_CAS_TRIES} times "
                                "while this node took the shard")

    def raise_epoch(self, shard: ShardId, at_least: int, *, node_id: str,
                    now_ms: int) -> int:
        """Raise the shard's counter to ``at_least`` (an epoch its log has applied), so
        the next take is above it; the counter after (never lowered)."""
        for _ in range(_CAS_TRIES):
            found = self._get(keys.epoch_key(shard), ShardEpoch)
            if found is not None and found[0].epoch >= at_least:
                return found[0].epoch
            try:
                self._c.put(self.key(keys.epoch_key(shard)), encode_record(ShardEpoch(
                    shard=keys.shard_segment(shard), epoch=at_least, node_id=node_id,
                    since_ms=now_ms)),
                    expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST if found is None
                    else found[1].version_id)
            except UnexpectedVersionId:
                continue
            return at_least
        raise CoordinationError(f"{shard}: its epoch counter changed {_CAS_TRIES} times "
                                "while this node raised it")

    def update_owner(self, session: Session, shard: ShardId, owned: Owned, *,
                     state: OwnerState, epoch: int | None = None,
                     detail: str = "", refused: bool = False) -> Owned:
        """Say where the owner is (its state, and why when FAILED), by CAS on the version
        it holds."""
        import msgspec

        record = msgspec.structs.replace(owned.record, state=state, detail=detail,
                                         refused=refused,
                                         epoch=owned.record.epoch if epoch is None else epoch)
        version = self._c.put(self.key(keys.owner_key(shard)), encode_record(record),
                              expected_version_id=owned.version.version_id, ephemeral=session)
        return Owned(record, version)

    def release(self, shard: ShardId, owned: Owned) -> bool:
        """Delete the ownership record if it is still the one held; False if it was not."""
        try:
            return self._c.delete(self.key(keys.owner_key(shard)),
                                  expected_version_id=owned.version.version_id)
        except UnexpectedVersionId:
            return False

    # planned moves ----------------------------------------------------------------------
    def warms(self) -> dict[ShardId, Warm]:
        """Each shard whose planned move's target says it is ready to take it."""
        return {keys.parse_segment(segment): warm
                for segment, (warm, _) in self._scan(keys.WARM, Warm).items()}

    def say_warm(self, session: Session, warm: Warm) -> None:
        """``warm`` on ``session`` (it goes with the session)."""
        self._c.put(self.key(keys.warm_key(keys.parse_segment(warm.shard))),
                    encode_record(warm), ephemeral=session)

    def unsay_warm(self, shard: ShardId, node_id: str) -> None:
        """Delete the shard's warm record if ``node_id`` made it (CAS on the version read)."""
        found = self._get(keys.warm_key(shard), Warm)
        if found is None or found[0].node_id != node_id:
            return
        with contextlib.suppress(UnexpectedVersionId):
            self._c.delete(self.key(keys.warm_key(shard)),
                           expected_version_id=found[1].version_id)

    def forget_session(self, session_id: int) -> list[str]:
        """Delete the records an ended session of ours left behind (its member, leader and
        ownership records: a store that was down when the session ended, and kept its
        lease on restart, keeps them until their TTL). Each delete is a CAS on the version
        read, so a record someone made meanwhile is never touched; the keys deleted."""
        gone: list[str] = []
        for prefix in (keys.NODES, keys.OWNERS, keys.LEADER, keys.WARM):
            low, high = prefix_range(self.key(prefix))
            for record in self._c.range_scan(low, high):
                if record.version.session_id != session_id:
                    continue
                try:
                    if self._c.delete(record.key, expected_version_id=record.version.version_id):
                        gone.append(record.key[len(self._root):])
                except UnexpectedVersionId:
                    continue
        return gone

    # all of it --------------------------------------------------------------------------
    def snapshot(self) -> ClusterView:
        found = self.config()
        return ClusterView(
            config=None if found is None else found[0], members=self.members(),
            leader=self.leader(),
            placements={shard: placement for shard, (placement, _) in self.placements().items()},
            owners={shard: owned.record for shard, owned in self.owners().items()},
            drains=self.drains())
