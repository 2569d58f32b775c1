"""``nereus payload``: the large payloads in the object store (``payloads/``).

``gc`` collects objects nobody can ever publish: a reservation that expired without a
commit, or an object with no payload stage in any shard. It keeps, always:

- every object a shard references as COMMITTED (in its live state, or in a PAYLOAD_COMMIT
  still queued in its Shard Log and not yet applied);
- every object in a shard's Recovery Floor (the external objects of its Recovery Set
  members): recovery from those checkpoints must find them;
- every reservation that has not expired yet (an upload may be in progress).

Why this is safe beside a running engine and running clients: the object listing is taken
*first*, and the client queues PAYLOAD_RESERVE *before* it uploads, so every object listed
already has its reservation in some Shard Log; gc then reads each shard's live state
read-only and the unapplied tail of its log, and so sees that reservation even if no shard
applied it yet. An expired reservation can never be committed (PAYLOAD_COMMIT is rejected
after ``expires_at`` by broker time); ``EXPIRY_MARGIN_MS`` covers clocks a little apart.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.checkpoint_catalog import Floor
    from nereus.adapters.objectstore.protocol import ObjectInfo, ObjectStore
    from nereus.shard import ShardId

app = typer.Typer(help="Large payloads in the object store.", no_args_is_help=True)

PREFIX = "payloads/"
EXPIRY_MARGIN_MS = 60_000


@dataclass(frozen=True, slots=True)
class Known:
    """What one shard says about one payload id (state, or its log's unapplied tail)."""

    payload_id: str
    shard: str
    state: str  # RESERVED | COMMITTED
    expires_at_ms: int | None
    object_key: str | None
    queued: bool  # seen only in the unapplied tail of the Shard Log


class PayloadObject(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One object under ``payloads/`` in ``payload gc``, and why it goes or stays."""

    key: str
    size_bytes: int
    reason: str


class PayloadGc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``payload gc`` document: the objects deleted (with ``dry_run``: that would be)
    and the ones kept."""

    dry_run: bool
    object_store: str
    deleted: list[PayloadObject]
    kept: list[PayloadObject]


@dataclass(frozen=True, slots=True)
class Judgement:
    key: str
    size_bytes: int
    collect: bool
    reason: str

    def view(self) -> PayloadObject:
        return PayloadObject(key=self.key, size_bytes=self.size_bytes, reason=self.reason)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _shards(env: Env) -> list[ShardId]:
    from nereus.shard import ShardId

    return [ShardId(route.name, partition) for route in env.config.routes.values()
            for partition in range(route.partitions)]


def _live_stages(env: Env, shard: ShardId) -> tuple[list[Known], int | None]:
    """Payload stages in the shard's live state (read-only) and its applied position."""
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Identity, PayloadStage, decode_value

    path = env.layout.shard_state(shard)
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


def _queued_stages(env: Env, shard: ShardId, applied: int | None) -> list[Known]:
    """PAYLOAD_RESERVE / PAYLOAD_COMMIT records after the applied position (not applied yet)."""
    from nereus.errors import NotFound
    from nereus.records import PayloadCommit, PayloadReserve, decode

    try:
        log = env.file_log(shard, create=False)
    except NotFound:
        return []
    position = max(0 if applied is None else applied + 1, log.start_position())
    found = []
    while batch := log.read(position, 1_000):
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


def _known(env: Env) -> list[Known]:
    found = []
    for shard in _shards(env):
        live, applied = _live_stages(env, shard)
        found.extend(live)
        found.extend(_queued_stages(env, shard, applied))
    return found


def _floors(env: Env, objects: ObjectStore) -> list[Floor]:
    from nereus.adapters.checkpoint_catalog import recovery_floor

    return [recovery_floor(objects, shard, env.config.checkpoints.keep) for shard in _shards(env)]


def _judge(info: ObjectInfo, known: list[Known], floors: list[Floor], now_ms: int) -> Judgement:
    from nereus.timespec import format_time_ms

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


def _judge_all(env: Env, objects: ObjectStore,
               listing: Iterable[ObjectInfo]) -> tuple[list[Judgement], list[Floor]]:
    infos = list(listing)  # listed before any state is read: see the module docstring
    known = _known(env)
    floors = _floors(env, objects)
    now_ms = _now_ms()
    return [_judge(info, known, floors, now_ms) for info in infos], floors


def _confirm(count: int, yes: bool) -> bool:
    from nereus.errors import UsageError

    if yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(
            f"refusing to delete {count} object(s) without confirmation: stdin is not a terminal",
            hint="pass --yes to delete, or --dry-run to list what would be deleted")
    return typer.confirm(f"delete {count} object(s) from the object store?", err=True)


@app.command("gc")
def gc(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be deleted; delete nothing.")] = False,
    yes: Annotated[bool, typer.Option(
        "--yes", help="Delete without asking (required when stdin is not a terminal).")] = False,
    key: Annotated[str | None, typer.Option(
        "--key", help="Delete this one object (refused if referenced or in a Recovery "
        "Floor).")] = None,
) -> None:
    """Collect abandoned large payloads (expired reservations, objects with no stage)."""
    from nereus.adapters.checkpoint_catalog import FloorViolation, check_floor
    from nereus.errors import NotConfirmed, NotFound, UsageError

    env: Env = ctx.obj
    objects = env.object_store()
    if key is not None:
        if not key.startswith(PREFIX):
            raise UsageError(f"--key {key!r} is not a large payload: gc deletes only keys under "
                             f"{PREFIX}")
        info = objects.head(key)
        if info is None:
            raise NotFound(f"no object {key} in {objects.description}")
        verdicts, floors = _judge_all(env, objects, [info])
        for floor in floors:
            check_floor(floor, delete_objects=frozenset({key}))
        if not verdicts[0].collect:
            raise FloorViolation(f"refusing to delete {key}: {verdicts[0].reason}",
                                 hint="an object that can still be published or recovered "
                                 "is never collected")
    else:
        verdicts, floors = _judge_all(env, objects, objects.list(PREFIX))
    doomed = [v for v in verdicts if v.collect]
    kept = [v for v in verdicts if not v.collect]
    for floor in floors:  # the last guard: nothing below any shard's Recovery Floor
        check_floor(floor, delete_objects=frozenset(v.key for v in doomed))
    deleted: list[Judgement] = []
    if doomed and not dry_run:
        if not _confirm(len(doomed), yes):
            raise NotConfirmed("not confirmed: nothing was deleted")
        with env.output.progress("deleting", len(doomed)) as advance:
            for verdict in doomed:
                objects.delete(verdict.key)
                deleted.append(verdict)
                advance(1)
    shown = doomed if dry_run else deleted
    data = msgspec.to_builtins(PayloadGc(
        dry_run=dry_run, object_store=objects.description,
        deleted=[v.view() for v in shown], kept=[v.view() for v in kept]))

    def human(out: Console) -> None:
        from nereus.cli.output import safe_markup as escape

        verb = "would delete" if dry_run else "deleted"
        for action, group in ((verb, shown), ("keep", kept)):
            for v in group:
                out.print(f"{action:<12} {escape(v.key)} ({v.size_bytes} bytes): "
                          f"{escape(v.reason)}")
        out.print(f"{verb} {len(shown)} object(s), kept {len(kept)} in {objects.description}")

    env.output.emit(data, human)
