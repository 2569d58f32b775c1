"""``nereus checkpoint``: take, list, verify, restore and prune a shard's checkpoints.

A checkpoint is a RocksDB checkpoint of the shard database uploaded to the object store
with a manifest (files, checksums, identity, applied position, digest) and registered in
the catalog. The Recovery Set built from them is ``nereus recovery-set``
(``recovery_set.py``).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from nereus.cli.commands.checkpoint_restore_guards import (
    may_replace,
    refuse_live,
    restore_target,
    terminated_cleanly,
)
from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.cli.verdict import emit_verdict
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.shard import ShardId

app = typer.Typer(help="Take, list, verify, upgrade and restore checkpoints.",
                  no_args_is_help=True)

ShardArg = Annotated[str, typer.Argument(metavar="SHARD", help="ROUTE/PARTITION, e.g. default/0.")]


@app.command("create")
def create(ctx: typer.Context, shard_name: ShardArg) -> None:
    """Take a checkpoint now, upload it, register it in the catalog."""
    from nereus.adapters.offline.checkpoint_take import CheckpointTaken, checkpoint_now, taken_view
    from nereus.layout import HomeLayout
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Identity

    env: Env = ctx.obj
    shard = env.shard(shard_name)
    if env.engine_running():
        from nereus.adapters.admin.wire import CheckpointRequest

        document = env.admin().post("/v1/checkpoints", CheckpointRequest(shard=str(shard)),
                                    CheckpointTaken, timeout=3600)
    else:
        objects = env.object_store()
        identity = Identity(route=shard.route, partition=shard.partition,
                            schema_version=keys.SCHEMA_VERSION)
        with ShardStore.open(env.layout.shard_state(shard), identity=identity) as store, \
                env.output.progress("uploading", None) as advance:
            taken = checkpoint_now(
                store, shard, objects, HomeLayout(env.home).root / "staging",
                token=uuid.uuid4().hex[:8], now_ms=time.time_ns() // 1_000_000,
                progress=advance, level=_feature_level(env))
        _mark(env, shard, taken.entry.checkpoint_id)
        document = taken_view(taken, objects)
    data = msgspec.to_builtins(document)
    env.output.emit(data, lambda out: out.print(
        f"checkpoint {data['checkpoint_id']} of {data['shard']} at applied position "
        f"{data['applied_position']}, digest {data['digest'][:16]}.., {data['files']} files, "
        f"{data['size_bytes']} bytes ({data['uploaded_bytes']} uploaded) -> "
        f"{data['object_store']}"))


def _feature_level(env: Env) -> int:
    """The level in force where this home writes: its cluster's, else its own (an offline
    checkpoint is incremental from level 2, as the engine's)."""
    from nereus.adapters.home.feature_level import home_level

    if env.layout.config.exists() and env.config.cluster is not None:
        from nereus.adapters.cluster.feature_levels import read_level
        from nereus.cli.commands.cluster.access import cluster_store

        with cluster_store(env, None) as store:
            return read_level(store).level.level
    return home_level(env.home).level


def _mark(env: Env, shard: ShardId, checkpoint_id: str) -> None:
    """Record the checkpoint in the Shard Log (CHECKPOINT_MARK), for the audit trail.

    An offline tool is not the shard's owner: the mark names it (``offline:USER@HOST``,
    epoch 0) and is RECORDED for the audit trail without moving the shard's mark."""
    import getpass
    import socket

    from nereus.records import CheckpointMark, encode

    env.command_log(shard).append([encode(CheckpointMark(
        mutation_id=str(uuid.uuid4()), checkpoint_id=checkpoint_id,
        owner_id=f"offline:{getpass.getuser()}@{socket.gethostname()}", fencing_epoch=0))])


@app.command("list")
def list_checkpoints(ctx: typer.Context, shard_name: ShardArg) -> None:
    """Catalogued checkpoints of a shard, oldest first; Recovery Set members marked."""
    from nereus.adapters.offline.checkpoint_catalog import catalog
    from nereus.cli.commands.checkpoint_documents import CheckpointList, CheckpointRow

    env: Env = ctx.obj
    shard = env.shard(shard_name)
    entries = catalog(env.object_store(), shard)
    keep = env.config.checkpoints.keep
    members = {e.checkpoint_id for e in entries[-keep:]}
    data = msgspec.to_builtins(CheckpointList(shard=str(shard), checkpoints=[
        CheckpointRow(checkpoint_id=e.checkpoint_id, applied_position=e.applied_position,
                      digest=e.digest, created_at=e.created_at,
                      in_recovery_set=e.checkpoint_id in members) for e in entries]))

    def human(out: Console) -> None:
        from rich.table import Table

        table = Table("checkpoint", "applied", "digest", "created", "recovery set")
        for row in data["checkpoints"]:
            table.add_row(row["checkpoint_id"], str(row["applied_position"]),
                          row["digest"][:16], row["created_at"],
                          "yes" if row["in_recovery_set"] else "")
        out.print(table)

    env.output.emit(data, human)


@app.command("verify")
def verify(
    ctx: typer.Context,
    checkpoint_id: Annotated[str | None, typer.Argument(metavar="ID")] = None,
    path: Annotated[Path | None, typer.Option(
        "--path", help="Verify a checkpoint directory (files + manifest.json) instead.")] = None,
    deep: Annotated[bool, typer.Option(
        "--deep", help="Also replay the log from it and compare with the next checkpoint "
        "or the live state.")] = False,
) -> None:
    """Prove a checkpoint usable: manifest, files, checksums, identity, DB, digest."""
    import shutil
    import tempfile

    from nereus.adapters.offline.checkpoint_catalog import find
    from nereus.adapters.offline.checkpoint_restore import download
    from nereus.checkpoint.verify import Check, CheckpointVerification
    from nereus.cli.commands.checkpoint_verification import verified
    from nereus.errors import NereusError, UsageError

    env: Env = ctx.obj
    if (checkpoint_id is None) == (path is None):
        raise UsageError("give a checkpoint ID or --path DIR (one of them)")
    scratch = Path(tempfile.mkdtemp(prefix="nereus-verify-"))
    try:
        if path is not None:
            if not path.is_dir():
                from nereus.errors import NotFound

                raise NotFound(f"no checkpoint directory at {path}")
            document = verified(env, path, None, deep=deep, scratch=scratch)
        else:
            assert checkpoint_id is not None
            objects = env.object_store()
            entry = find(objects, checkpoint_id)
            directory = scratch / checkpoint_id
            try:
                with env.output.progress("downloading", None) as advance:
                    download(objects, entry, directory, advance)
            except NereusError as exc:
                document = CheckpointVerification(
                    ok=False, path=None, checkpoint_id=checkpoint_id,
                    checks=[Check(name="download", ok=False, detail=exc.message)])
            else:
                document = verified(env, directory, entry, deep=deep, scratch=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    emit_verdict(env, document, f"checkpoint {checkpoint_id or path}")


@app.command("upgrade")
def upgrade(
    ctx: typer.Context,
    path: Annotated[Path, typer.Option(
        "--path", help="The checkpoint directory (files + manifest.json) to upgrade.")],
) -> None:
    """Verify a format 1 checkpoint directory, then rewrite its manifest as format 2."""
    from nereus.checkpoint.verify import read_manifest, upgrade_manifest
    from nereus.cli.commands.checkpoint_documents import CheckpointUpgrade
    from nereus.errors import NotFound

    env: Env = ctx.obj
    if not path.is_dir():
        raise NotFound(f"no checkpoint directory at {path}")
    before = read_manifest(path).format_version
    with env.output.progress("verifying and upgrading", None):
        after = upgrade_manifest(path)
    document = CheckpointUpgrade(
        path=str(path), checkpoint_id=after.checkpoint_id, format_version_before=before,
        format_version=after.format_version, upgraded=before != after.format_version,
        digest=after.digest)

    def human(out: Console) -> None:
        if document.upgraded:
            out.print(f"checkpoint {document.checkpoint_id} verified and upgraded: format "
                      f"{before} -> {after.format_version}, digest {after.digest[:16]}..")
        else:
            out.print(f"checkpoint {document.checkpoint_id} is already format "
                      f"{after.format_version}; nothing to do")

    env.output.emit(msgspec.to_builtins(document), human)


@app.command("restore")
def restore(
    ctx: typer.Context,
    checkpoint_id: Annotated[str, typer.Argument(metavar="ID")],
    into: Annotated[Path, typer.Option(
        "--into", help="The directory to restore into: new, empty, or (with --force) one to "
        "replace.")],
    force: Annotated[bool, typer.Option(
        "--force", help="Replace a non-empty --into: one an earlier restore created at once, "
        "any other after confirmation. Never a live store.")] = False,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="With --force: replace a directory a restore did not create "
        "without asking (scripts; required without a terminal).")] = False,
) -> None:
    """Download a checkpoint next to --into, verify it there, then move it into place.

    The checkpoint is staged in a hidden directory beside --into (same filesystem) and
    renamed into place only after every check passed: a failed or interrupted restore
    leaves nothing at --into and removes its staging directory. Exits 1 when a check
    fails.

    Refused whatever the flags (exit 1): a live store, that is a RocksDB directory some
    running process has open, anything under state/ of a home whose engine runs, a
    non-empty directory inside such a home, a Nereus home, the object store itself. A
    non-empty directory needs --force; a restore's own earlier output (marked with a
    .nereus-restore file) is then replaced at once, any other directory after a prompt on
    a terminal or with --yes (without a terminal and without --yes: exit 2).
    """
    from nereus.adapters.offline.checkpoint_catalog import find
    from nereus.adapters.offline.checkpoint_restore import restore_into
    from nereus.cli.commands.checkpoint_documents import CheckpointRestore

    env: Env = ctx.obj
    objects = env.object_store()
    protected = [(Path(root), f"the object store {objects.description}")
                 for root in [getattr(objects, "root", None)] if root is not None]
    target = restore_target(into, protected)
    entry = find(objects, checkpoint_id)
    may_replace(env, target, into, entry.checkpoint_id, force=force, yes=yes)
    replacing = target.state in ("restored", "foreign")
    with terminated_cleanly(), env.output.progress("downloading", None) as advance:
        report = restore_into(  # the engine may have started while we downloaded
            objects, entry, target.path, advance, replace=replacing, mark=True,
            before_move=lambda: refuse_live(target, protected, replacing=replacing))
    document = CheckpointRestore(
        checkpoint_id=entry.checkpoint_id, shard=f"{entry.route}/{entry.partition}",
        into=str(target.path), applied_position=entry.applied_position, digest=entry.digest,
        ok=report.ok, replaced=target.state if replacing else None, checks=report.checks)
    if not report.ok:
        emit_verdict(env, document,
                     f"restore of {checkpoint_id} (nothing was written to {into})")
        return
    data = msgspec.to_builtins(document)
    env.output.emit(data, lambda out: out.print(
        f"restored {entry.checkpoint_id} of {data['shard']} into {target.path} (applied "
        f"position {entry.applied_position}, digest verified {entry.digest[:16]}..)"))


@app.command("prune")
def prune(
    ctx: typer.Context,
    shard_name: ShardArg,
    keep: Annotated[int | None, typer.Option(
        "--keep", min=1, metavar="N", help="Keep the newest N catalogued checkpoints "
        "(default: [checkpoints] keep). Recovery Set members are always kept.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would go.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask before deleting.")] = False,
) -> None:
    """Delete catalogued checkpoints older than the newest N, never a Recovery Set member.

    Exits 1 when a checkpoint you asked to delete was refused (it is in the Recovery Set).
    """
    from nereus.adapters.offline.checkpoint_catalog import (
        catalog,
        delete_checkpoint,
        recovery_floor,
    )
    from nereus.checkpoint.retention import plan_prune
    from nereus.cli.commands.checkpoint_documents import CheckpointPrune, PruneRefusal

    env: Env = ctx.obj
    shard = env.shard(shard_name)
    objects = env.object_store()
    recovery_keep = env.config.checkpoints.keep
    wanted = recovery_keep if keep is None else keep
    plan = plan_prune(catalog(objects, shard), keep=wanted, recovery_keep=recovery_keep)
    if plan.deleted and not dry_run and not yes:
        _confirm_prune(shard, [e.checkpoint_id for e in plan.deleted])
    deleted = [e.checkpoint_id for e in plan.deleted]
    if not dry_run:
        # the floor as it is now: a checkpoint taken meanwhile only pushes ours further out
        floor = recovery_floor(objects, shard, recovery_keep)
        for entry in plan.deleted:
            delete_checkpoint(objects, entry, floor)
    data = msgspec.to_builtins(CheckpointPrune(
        shard=str(shard), keep=wanted, recovery_set_keep=recovery_keep, dry_run=dry_run,
        object_store=objects.description, kept=[e.checkpoint_id for e in plan.kept],
        deleted=deleted,
        refused=[PruneRefusal(checkpoint_id=r.entry.checkpoint_id,
                              applied_position=r.entry.applied_position, reason=r.reason)
                 for r in plan.refused]))

    def human(out: Console) -> None:
        from nereus.cli.output import safe_markup as escape

        verb = "would delete" if dry_run else "deleted"
        out.print(f"{verb} {len(deleted)} checkpoint(s) of {shard}, kept {len(data['kept'])} "
                  f"(Recovery Set: newest {recovery_keep})")
        for checkpoint_id in data["deleted"]:
            out.print(f"  {verb} {checkpoint_id}")
        for refusal in data["refused"]:
            out.print(f"  [yellow]refused[/yellow] {refusal['checkpoint_id']}: "
                      f"{escape(refusal['reason'])}")

    env.output.emit(data, human)
    if plan.refused:
        raise Answered(ExitCode.NO)


def _confirm_prune(shard: ShardId, doomed: list[str]) -> None:
    """Deleting ``doomed`` needs a yes on a terminal (without one: ``--yes``, exit 2)."""
    import sys

    from nereus.errors import NotConfirmed, UsageError

    listing = ", ".join(doomed)
    if not sys.stdin.isatty():
        raise UsageError(f"prune would delete {len(doomed)} checkpoint(s) of {shard} "
                         f"({listing})", hint="pass --yes to delete them, or --dry-run "
                         "to only list them")
    if not typer.confirm(f"delete {len(doomed)} checkpoint(s) of {shard}: "
                         f"{listing}?", default=False, err=True):
        raise NotConfirmed("not confirmed: nothing was deleted")
