"""``nereus shard replay | digest | prune``: the log as history. Replay applies it offline
(from empty or from a checkpoint) into a new database and prints the digest; digest reads
one of a database; prune deletes the log below the Recovery Floor, never above."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.commands.shard.options import MAX_POSITION, DbOption, ShardArg, open_db
from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.shard import ShardId


def replay(
    ctx: typer.Context,
    shard_name: ShardArg,
    empty: Annotated[bool, typer.Option("--empty", help="Start from an empty state.")] = False,
    from_checkpoint: Annotated[str | None, typer.Option(
        "--from-checkpoint", metavar="ID", help="Start from a checkpoint.")] = None,
    to: Annotated[int | None, typer.Option("--to", metavar="POS", min=0, max=MAX_POSITION,
                                           help="Stop after applying this position.")] = None,
    into: Annotated[Path | None, typer.Option(
        "--into", help="Write the database here (default: a temporary directory).")] = None,
    log_dir: Annotated[Path | None, typer.Option(
        "--log-dir", help="Read the log from this directory instead of the home.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty --into.")] = False,
    compare: Annotated[str | None, typer.Option(
        "--compare", metavar="live|checkpoint:ID",
        help="Replay up to the live database's (or that checkpoint's) position and compare "
        "digests.")] = None,
) -> None:
    """Apply the shard's log offline, deterministically, and print the digest."""
    from nereus.errors import UsageError

    env: Env = ctx.obj
    if empty == (from_checkpoint is not None):
        raise UsageError("say where replay starts: --empty or --from-checkpoint ID (one)")
    if compare is not None or from_checkpoint is not None:
        _replay_checkpoint(env, shard_name, from_checkpoint, to, into, force, compare, log_dir)
        return
    _replay_empty(env, shard_name, to, into, force, log_dir)


def _replay_empty(env: Env, shard_name: str, to: int | None, into: Path | None, force: bool,
                  log_dir: Path | None) -> None:
    """Replay from an empty state, into ``into`` or a temporary directory."""
    import msgspec

    from nereus.adapters.offline.log_replay import replay_empty
    from nereus.cli.commands.shard.documents import ShardReplay
    from nereus.shard import ShardId

    shard = ShardId.parse(shard_name) if log_dir is not None else env.shard(shard_name)
    log = env.shard_log(shard, directory=log_dir, create=False)
    total = log.end_position()
    if to is not None:
        total = min(total, to + 1)
    scratch = None
    if into is None:
        scratch = tempfile.TemporaryDirectory(prefix="nereus-replay-")
        target = Path(scratch.name) / "db"
    else:
        target = into
    try:
        with env.output.progress(f"replaying {shard}", total) as advance:
            report = replay_empty(log, shard, target,
                                  stop_at=to, replace=force, progress=advance)
    finally:
        log.close()
    data = msgspec.to_builtins(ShardReplay(
        shard=str(shard), records_applied=report.records,
        applied_position=report.applied_position, digest=report.digest,
        into=None if scratch else str(report.into)))
    if scratch is not None:
        scratch.cleanup()

    def human(out: Console) -> None:
        out.print(f"replayed {report.records} record(s) of {shard} "
                  f"(applied position {report.applied_position})")
        out.print(f"  digest {report.digest}")
        if data["into"]:
            out.print(f"  database {data['into']}")

    env.output.emit(data, human)


def digest(ctx: typer.Context, shard_name: ShardArg, db: DbOption = None) -> None:
    """Print the canonical digest (key order) of the shard's replicated state."""
    import msgspec

    from nereus.adapters.offline.log_replay import store_digest
    from nereus.cli.commands.shard.documents import ShardDigest

    env: Env = ctx.obj
    shard, store = open_db(env, shard_name, db)
    with store:
        data = msgspec.to_builtins(ShardDigest(
            shard=str(shard), digest=store_digest(store),
            applied_position=store.applied_position(), db=str(store.path)))
    env.output.emit(data, lambda out: out.print(
        f"{data['shard']} digest {data['digest']} at applied position {data['applied_position']}"
    ))


def prune(
    ctx: typer.Context,
    shard_name: ShardArg,
    before: Annotated[int | None, typer.Option(
        "--before", metavar="POS", min=0, max=MAX_POSITION,
        help="Delete segments wholly before this position "
        "(default: the Recovery Floor).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would go.")] = False,
) -> None:
    """Log retention: delete the log below the Recovery Floor, never above (whole file-log
    segments; Kafka records with DeleteRecords)."""
    import itertools

    import msgspec

    from nereus.adapters.backends.shardlog.file_log import FileShardLog
    from nereus.adapters.backends.shardlog.protocol import PrunableLog
    from nereus.adapters.offline.checkpoint_catalog import check_floor, recovery_floor
    from nereus.cli.commands.shard.documents import ShardPrune
    from nereus.errors import UsageError

    env: Env = ctx.obj
    shard = env.shard(shard_name)
    floor = recovery_floor(env.object_store(), shard, env.config.checkpoints.keep)
    position = floor.position if before is None else before
    check_floor(floor, delete_before=position)
    log = env.shard_log(shard, create=False)
    if not isinstance(log, PrunableLog):
        raise UsageError(f"route {shard.route}'s {env.config.route(shard.route).log} log "
                         "keeps its own retention; nereus does not delete from it")
    if not dry_run:
        deleted = log.delete_before(position)
    elif isinstance(log, FileShardLog):
        deleted = [str(path) for (_, path), (nxt, _) in itertools.pairwise(log.segments())
                   if nxt <= position]
    else:
        start = log.start_position()
        deleted = [f"{getattr(log, 'description', shard)} positions {start}..{position - 1}"
                   ] if position > start else []
    data = msgspec.to_builtins(ShardPrune(
        shard=str(shard), before=position, floor_position=floor.position, dry_run=dry_run,
        deleted=deleted, log_start_position=log.start_position()))
    env.output.emit(data, lambda out: out.print(
        f"{'would delete' if dry_run else 'deleted'} {len(deleted)} part(s) of {shard} before "
        f"position {position} (Recovery Floor {floor.position}); log now starts at "
        f"{data['log_start_position']}"))


def _replay_checkpoint(env: Env, shard_name: str, checkpoint_id: str | None, to: int | None,
                       into: Path | None, force: bool, compare: str | None,
                       log_dir: Path | None) -> None:
    """Replay from a checkpoint (or from empty) with an optional digest comparison."""
    import shutil

    import msgspec

    from nereus.adapters.offline.deep_verify import replay_from
    from nereus.cli.commands.shard.documents import ShardReplay
    from nereus.errors import NereusError
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore

    shard = ShardId.parse(shard_name) if log_dir is not None else env.shard(shard_name)
    log = env.shard_log(shard, directory=log_dir, create=False)
    scratch = Path(tempfile.mkdtemp(prefix="nereus-replay-"))
    try:
        image = scratch / "image"
        start_id = _start_image(env, shard, checkpoint_id, image)
        target, expected, against, version = _compared(env, shard, compare, to)
        destination = into or scratch / "db"
        if destination.exists() and any(destination.iterdir()):
            if not force:
                raise NereusError(f"{destination} is not empty",
                                  hint="choose an empty directory, or pass --force")
            shutil.rmtree(destination)
        with env.output.progress(f"replaying {shard}", None) as advance:
            records, digest = replay_from(image, destination, log,
                                          stop_at=target, progress=advance,
                                          digest_version=version)
        with ShardStore.open(destination, read_only=True) as result:
            applied = result.applied_position()
    finally:
        log.close()
    report = ShardReplay(
        shard=str(shard), from_checkpoint=start_id, records_applied=records,
        applied_position=applied, digest=digest, into=str(into) if into else None)
    if expected is not None:
        report = msgspec.structs.replace(report, compare=against, expected_digest=expected,
                                           match=digest == expected)
    data = msgspec.to_builtins(report)
    shutil.rmtree(scratch, ignore_errors=True)

    def human(out: Console) -> None:
        origin = f"checkpoint {start_id}" if start_id else "empty"
        out.print(f"replayed {records} record(s) of {shard} from {origin} "
                  f"(applied position {applied})")
        out.print(f"  digest {digest}")
        if expected is not None:
            verdict = "[green]matches[/green]" if digest == expected else "[red]DIFFERS from[/red]"
            out.print(f"  {verdict} {against} ({expected[:16]}..)")

    env.output.emit(data, human)
    if expected is not None and digest != expected:
        raise Answered(ExitCode.NO)


def _start_image(env: Env, shard: ShardId, checkpoint_id: str | None, image: Path) -> str | None:
    """Write the state replay starts from at ``image``: the checkpoint (its id returned),
    or an empty database holding only the shard's identity (None)."""
    from nereus.adapters.offline.checkpoint_catalog import find
    from nereus.adapters.offline.checkpoint_restore import download
    from nereus.errors import UsageError
    from nereus.state import keys
    from nereus.state.store import ShardStore, identity_writes
    from nereus.state.values import Identity

    if checkpoint_id is None:
        identity = Identity(route=shard.route, partition=shard.partition,
                            schema_version=keys.SCHEMA_VERSION)
        with ShardStore.open(image, create=True) as empty_store:
            empty_store.write(identity_writes(identity))
        return None
    entry = find(env.object_store(), checkpoint_id)
    if (entry.route, entry.partition) != (shard.route, shard.partition):
        raise UsageError(f"checkpoint {checkpoint_id} belongs to shard "
                         f"{entry.route}/{entry.partition}, not {shard}")
    download(env.object_store(), entry, image)
    return entry.checkpoint_id


def _compared(env: Env, shard: ShardId, compare: str | None,
              to: int | None) -> tuple[int | None, str | None, str, int]:
    """Where replay stops, the digest it should reach there, what that digest is of
    (``--compare live`` the live database, ``checkpoint:ID``, or none with ``--to``) and
    its state digest version (a format 1 checkpoint carries v1)."""
    from nereus.adapters.offline.checkpoint_catalog import find
    from nereus.adapters.offline.log_replay import store_digest
    from nereus.errors import UsageError
    from nereus.state.digest import DIGEST_VERSION
    from nereus.state.store import ShardStore

    if compare is None:
        return to, None, "", DIGEST_VERSION
    if compare == "live":
        with ShardStore.open(env.layout.shard_state(shard), read_only=True) as live:
            return (live.applied_position(), store_digest(live), "the live database",
                    DIGEST_VERSION)
    if compare.startswith("checkpoint:"):
        other = find(env.object_store(), compare.split(":", 1)[1])
        return (other.applied_position, other.digest, f"checkpoint {other.checkpoint_id}",
                other.digest_version)
    raise UsageError(f"--compare {compare!r}: expected live or checkpoint:ID")
