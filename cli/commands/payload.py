"""``nereus payload``: the large payloads in the object store (``payloads/``).

``gc`` collects objects nobody can ever publish: a reservation that expired without a
commit, or an object with no payload stage in any shard. What it keeps, always, and why
that is safe beside a running engine and running clients, is
``nereus.adapters.offline.payload_collection`` (the engine's own collector judges with the same
code).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from nereus.cli.context import Env
from nereus.payload_objects import PREFIX
from nereus.shard import ShardId

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.backends.objectstore.protocol import ObjectInfo, ObjectStore
    from nereus.adapters.offline.checkpoint_catalog import Floor
    from nereus.adapters.offline.payload_collection import Judgement

app = typer.Typer(help="Large payloads in the object store.", no_args_is_help=True)


class PayloadObject(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One object under ``payloads/`` in ``payload gc``, and why it goes or stays."""

    key: str
    size_bytes: int
    reason: str


class PayloadGc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                omit_defaults=True):
    """The ``payload gc`` document: the objects deleted (with ``dry_run``: that would be)
    and the ones kept."""

    dry_run: bool
    object_store: str
    deleted: list[PayloadObject]
    kept: list[PayloadObject]
    # on a node of a cluster: the shards whose objects were judged (those ACTIVE on this
    # home's node or its workers); omitted on a home that holds every shard
    shards: list[str] | None = None


def _view(judgement: Judgement) -> PayloadObject:
    return PayloadObject(key=judgement.key, size_bytes=judgement.size_bytes,
                         reason=judgement.reason)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _node_shards(env: Env) -> list[ShardId]:
    """The shards ACTIVE on this home's node (or its workers), as the coordinator says."""
    from nereus.cli.commands.cluster.access import cluster_store
    from nereus.cluster.records import OwnerState
    from nereus.engine.hosting.workers.home import is_home_member

    with cluster_store(env, None) as store:
        owners = store.owners()
    return sorted(shard for shard, owned in owners.items()
                  if owned.record.state == OwnerState.ACTIVE
                  and is_home_member(env.config, owned.record.node_id))


def _judge_on_node(env: Env, objects: ObjectStore, info: ObjectInfo,
                   shards: list[ShardId]) -> tuple[list[Judgement], list[Floor]]:
    """``--key`` on a node: judged against its shard, which must be ACTIVE here."""
    from nereus.adapters.offline.payload_collection import judge_shards
    from nereus.errors import UsageError
    from nereus.payload_objects import shard_of

    key = info.key
    found = shard_of(key)
    shard = None if found is None else ShardId(*found)
    if shard is None or shard not in shards:
        where = "is under no shard's prefix" if shard is None else \
            f"belongs to shard {shard}, which is not ACTIVE on this node"
        raise UsageError(f"--key {key}: the object {where}; a node judges only the objects "
                         "of the shards it owns",
                         hint="run it in the home of the node that owns the shard "
                              "(`nereus cluster status` names it)")
    return judge_shards(env.config, env.layout, objects, [shard], _now_ms(), listing=[info])


def _confirm(count: int, yes: bool) -> bool:
    from nereus.errors import UsageError

    if yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(
            f"refusing to delete {count} object(s) without confirmation: stdin is not a terminal",
            hint="pass --yes to delete, or --dry-run to list what would be deleted")
    return typer.confirm(f"delete {count} object(s) from the object store?", err=True)


def _judgements(env: Env, objects: ObjectStore, key: str | None, shards: list[ShardId] | None
                ) -> tuple[list[Judgement], list[Floor]]:
    """The verdict on ``key`` (refused unless it may go), or on every large payload: of the
    whole home, or of ``shards`` on a node of a cluster."""
    from nereus.adapters.offline.checkpoint_catalog import FloorViolation, check_floor
    from nereus.adapters.offline.payload_collection import judge_all, judge_shards
    from nereus.errors import NotFound, UsageError

    if key is None:
        if shards is None:
            return judge_all(env.config, env.layout, objects, objects.list(PREFIX), _now_ms())
        return judge_shards(env.config, env.layout, objects, shards, _now_ms())
    if not key.startswith(PREFIX):
        raise UsageError(f"--key {key!r} is not a large payload: gc deletes only keys under "
                         f"{PREFIX}")
    info = objects.head(key)
    if info is None:
        raise NotFound(f"no object {key} in {objects.description}")
    if shards is None:
        verdicts, floors = judge_all(env.config, env.layout, objects, [info], _now_ms())
    else:
        verdicts, floors = _judge_on_node(env, objects, info, shards)
    for floor in floors:
        check_floor(floor, delete_objects=frozenset({key}))
    if not verdicts[0].collect:
        raise FloorViolation(f"refusing to delete {key}: {verdicts[0].reason}",
                             hint="an object that can still be published or recovered "
                             "is never collected")
    return verdicts, floors


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
    """Collect abandoned large payloads (expired reservations, objects with no stage).

    On a node of a cluster it judges only the objects of the shards ACTIVE on the node (as
    its engine does every [engine] payload_gc_interval), each against its own shard.
    """
    from nereus.adapters.offline.checkpoint_catalog import check_floor
    from nereus.adapters.offline.payload_collection import delete_collected
    from nereus.errors import NotConfirmed

    env: Env = ctx.obj
    objects = env.object_store()
    node = env.config.cluster
    shards = None if node is None else _node_shards(env)
    verdicts, floors = _judgements(env, objects, key, shards)
    doomed = [v for v in verdicts if v.collect]
    kept = [v for v in verdicts if not v.collect]
    for floor in floors:  # the last guard: nothing below any shard's Recovery Floor
        check_floor(floor, delete_objects=frozenset(v.key for v in doomed))
    deleted: list[Judgement] = []
    if doomed and not dry_run:
        if not _confirm(len(doomed), yes):
            raise NotConfirmed("not confirmed: nothing was deleted")
        with env.output.progress("deleting", len(doomed)) as advance:
            deleted = delete_collected(objects, verdicts, floors, advance=advance)
    shown = doomed if dry_run else deleted
    data = msgspec.to_builtins(PayloadGc(
        dry_run=dry_run, object_store=objects.description,
        deleted=[_view(v) for v in shown], kept=[_view(v) for v in kept],
        shards=None if shards is None else [str(s) for s in shards]))

    def human(out: Console) -> None:
        from nereus.cli.output import safe_markup as escape

        if node is not None and shards is not None:
            mine = ", ".join(map(str, shards)) or "none"
            out.print(f"node {escape(node.node_id)}: the objects of the shards ACTIVE here "
                      f"({escape(mine)})")
        verb = "would delete" if dry_run else "deleted"
        for action, group in ((verb, shown), ("keep", kept)):
            for v in group:
                out.print(f"{action:<12} {escape(v.key)} ({v.size_bytes} bytes): "
                          f"{escape(v.reason)}")
        out.print(f"{verb} {len(shown)} object(s), kept {len(kept)} in {objects.description}")

    env.output.emit(data, human)
