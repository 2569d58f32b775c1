"""Large-payload collection: which objects under ``payloads/`` nobody can ever publish, for
``nereus payload gc`` and the engine's collector (``engine/process/payload_collector.py``).

An object is collected when its reservation expired without a commit, or no shard holds a
stage for it; it is kept while any shard references it as COMMITTED (live state or an
unapplied PAYLOAD_COMMIT in its log), while it is in a Recovery Floor, or while its
reservation has not expired. Safe beside running engines and clients: the listing is taken
*first*, and a client queues PAYLOAD_RESERVE *before* it uploads, so every listed object's
reservation is in a Shard Log the judgement then reads (live state read-only, plus the
unapplied tail up to the log's end, from file segments or the Command Topic).
``judge_all`` judges every shard of the home (refused on a cluster node); ``judge_shards``
only the given shards' own prefixes, enough because a PAYLOAD_COMMIT must name its own
shard's prefix (``docs/rules.md`` §5). A shard whose live state is older than its log's
start is refused in either scope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from nereus.adapters.backends.objectstore.protocol import ObjectInfo, ObjectStore
from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.adapters.backends.shardlog.protocol import PrunableLog, ShardLog
from nereus.adapters.offline.checkpoint_catalog import Floor, check_floor, recovery_floor
from nereus.config import Config
from nereus.errors import UsageError
from nereus.layout import HomeLayout
from nereus.payload_objects import shard_prefix
from nereus.records import PayloadCommit, PayloadReserve, decode
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity, PayloadStage, decode_value
from nereus.timespec import format_time_ms

EXPIRY_MARGIN_MS: Final = 60_000


@dataclass(frozen=True, slots=True)
class Known:
    """What one shard says about one payload id (state, or its log's unapplied tail)."""

    payload_id: str
    shard: str
    state: str  # RESERVED | COMMITTED
    expires_at_ms: int | None
    object_key: str | None
    queued: bool  # seen only in the unapplied tail of the Shard Log


@dataclass(frozen=True, slots=True)
class Judgement:
    """One listed object: collect it or not, and why."""

    key: str
    size_bytes: int
    collect: bool
    reason: str


def shards_of(config: Config) -> list[ShardId]:
    """Every shard of every configured route."""
    return [ShardId(route.name, partition) for route in config.routes.values()
            for partition in range(route.partitions)]


def check_whole_home(config: Config) -> None:
    """Refuse a node of a cluster: it holds only the shards granted to it, and the
    checkpoints (so the Recovery Floors) are in the coordinator's catalog, so an object it
    saw no stage of may be another node's committed payload."""
    if config.cluster is not None:
        raise UsageError(
            f"this home is node {config.cluster.node_id} of a cluster: it holds only the shards "
            "granted to it, so payloads the other nodes still need would look unreferenced; "
            "the whole home is judged only where every shard of its routes is held",
            hint="on a node, judge the shards it owns (judge_shards)")


def _live_stages(layout: HomeLayout, shard: ShardId) -> tuple[list[Known], int | None]:
    """Payload stages in the shard's live state (read-only) and its applied position."""
    path = layout.shard_state(shard)
    if not (path / "CURRENT").exists():
        return [], None
    identity = Identity(route=shard.route, partition=shard.partition,
                        schema_version=keys.SCHEMA_VERSION)
    found = []
    with ShardStore.open(path, read_only=True, identity=identity) as store:
        for _, raw in store.scan_prefix(keys.PAYLOAD):
            stage = decode_value(raw, PayloadStage)
            found.append(Known(stage.payload_id, str(shard), stage.state, stage.expires_at_ms,
                               stage.object_key, queued=False))
        return found, store.applied_position()


def _queued_stages(config: Config, layout: HomeLayout, shard: ShardId,
                   applied: int | None) -> list[Known]:
    """PAYLOAD_RESERVE / PAYLOAD_COMMIT records after the applied position (not applied yet),
    read from the shard's log up to its end as it is now."""
    route = config.route(shard.route)
    if route.log == "file" and not layout.shard_log(shard).is_dir():
        return []
    log = open_shard_log(route, shard, layout.root, create=False)
    try:
        position = _first_unapplied(log, shard, applied)
        end = log.end_position()
        found = []
        while position < end and (batch := log.read(position, 1_000)):
            for item in batch:
                record = decode(item.payload)
                if isinstance(record, PayloadReserve):
                    found.append(Known(record.payload_id, str(shard), "RESERVED",
                                       record.expires_at_ms, None, queued=True))
                elif isinstance(record, PayloadCommit):
                    found.append(Known(record.payload_id, str(shard), "COMMITTED", None,
                                       record.object_key, queued=True))
            position = batch[-1].position + 1
        return found
    finally:
        log.close()


def _first_unapplied(log: ShardLog, shard: ShardId, applied: int | None) -> int:
    """Where the unapplied tail begins; refused when a dense log no longer holds it."""
    first = 0 if applied is None else applied + 1
    if not isinstance(log, PrunableLog):
        return first
    start = log.start_position()
    if log.dense and start > first:
        state = "has no live state here" if applied is None else \
            f"has its live state here at position {applied}"
        raise UsageError(
            f"shard {shard} {state}, but its log starts at position {start}: reservations and "
            "commits in the records between cannot be seen, so no payload can be judged",
            hint="start the engine, which recovers the shard from its newest checkpoint and "
                 "its log, then run it again")
    return max(first, start)


def known_stages(config: Config, layout: HomeLayout, shards: Iterable[ShardId]) -> list[Known]:
    """What ``shards`` say about payloads: each one's live state, then its unapplied tail."""
    found = []
    for shard in shards:
        live, applied = _live_stages(layout, shard)
        found.extend(live)
        found.extend(_queued_stages(config, layout, shard, applied))
    return found


def floors(config: Config, objects: ObjectStore, shards: Iterable[ShardId]) -> list[Floor]:
    """The Recovery Floor of each of ``shards`` (what its Recovery Set members reference)."""
    return [recovery_floor(objects, shard, config.checkpoints.keep) for shard in shards]


def judge(info: ObjectInfo, known: list[Known], floors: list[Floor], now_ms: int) -> Judgement:
    """Collect ``info`` or keep it, and why (the module docstring's rules)."""
    def verdict(collect: bool, reason: str) -> Judgement:
        return Judgement(info.key, info.size, collect, reason)

    for floor in floors:
        if info.key in floor.external_objects:
            return verdict(False, f"in the Recovery Floor of {floor.shard}")
    for item in known:
        if item.state == "COMMITTED" and item.object_key == info.key:
            queued = " (queued, not yet applied)" if item.queued else ""
            return verdict(False, f"payload {item.payload_id} is COMMITTED on shard "
                                  f"{item.shard}{queued}")
    payload_id = info.key.rsplit("/", 1)[-1]
    stages = [k for k in known if k.payload_id == payload_id]
    if not stages:
        return verdict(True, "no payload stage in any shard")
    live = [k for k in stages if k.state == "RESERVED" and k.expires_at_ms is not None
            and k.expires_at_ms + EXPIRY_MARGIN_MS >= now_ms]
    if live:
        return verdict(False, f"reserved on shard {live[0].shard} until "
                              f"{format_time_ms(live[0].expires_at_ms or 0)}")
    committed = [k for k in stages if k.state == "COMMITTED"]
    if committed:
        return verdict(True, f"payload {payload_id} was committed as {committed[0].object_key}, "
                             "not this key")
    expired = max(k.expires_at_ms or 0 for k in stages)
    return verdict(True, f"reservation expired at {format_time_ms(expired)} without a commit "
                         f"(shard {stages[0].shard})")


def judge_all(config: Config, layout: HomeLayout, objects: ObjectStore,
              listing: Iterable[ObjectInfo], now_ms: int) -> tuple[list[Judgement], list[Floor]]:
    """Judge every listed object; the listing is taken before any state is read."""
    check_whole_home(config)
    infos = list(listing)  # listed before any state is read: see the module docstring
    shards = shards_of(config)
    known = known_stages(config, layout, shards)
    found = floors(config, objects, shards)
    return [judge(info, known, found, now_ms) for info in infos], found


def judge_shards(config: Config, layout: HomeLayout, objects: ObjectStore,
                 shards: Iterable[ShardId], now_ms: int,
                 listing: Iterable[ObjectInfo] | None = None
                 ) -> tuple[list[Judgement], list[Floor]]:
    """Judge the objects under the prefixes of ``shards`` only, against those shards alone
    (a node of a cluster: the shards it owns); ``listing``: those objects, already listed
    (one named object), else every prefix is listed. Either way before any state is read,
    as in ``judge_all``."""
    mine = sorted(set(shards))
    infos = list(listing) if listing is not None else [
        info for shard in mine for info in objects.list(shard_prefix(shard.route,
                                                                     shard.partition))]
    known = known_stages(config, layout, mine)
    found = floors(config, objects, mine)
    return [judge(info, known, found, now_ms) for info in infos], found


def delete_collected(objects: ObjectStore, verdicts: list[Judgement], found: list[Floor], *,
                     advance: Callable[[int], None] = lambda _: None) -> list[Judgement]:
    """Delete what ``verdicts`` collect, after the last guard: nothing in any shard's
    Recovery Floor (``FloorViolation`` otherwise, nothing deleted). Returns what went."""
    doomed = [v for v in verdicts if v.collect]
    for floor in found:
        check_floor(floor, delete_objects=frozenset(v.key for v in doomed))
    deleted = []
    for verdict in doomed:
        objects.delete(verdict.key)
        deleted.append(verdict)
        advance(1)
    return deleted
