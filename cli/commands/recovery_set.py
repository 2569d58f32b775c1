"""``nereus recovery-set``: show and verify a shard's Recovery Set and its Recovery Floor.

The Recovery Set is the newest ``[checkpoints] keep`` catalogued checkpoints of a shard;
the Floor is what they need to stay usable: the oldest log position a restore replays
from, and the external objects (payloads) their state references.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.offline.checkpoint_catalog import Floor
    from nereus.cli.commands.checkpoint_documents import RecoverySetView
    from nereus.shard import ShardId

app = typer.Typer(help="The Recovery Set and Recovery Floor of a shard.", no_args_is_help=True)

ShardArg = Annotated[str, typer.Argument(metavar="SHARD", help="ROUTE/PARTITION, e.g. default/0.")]


def _floor_view(env: Env, shard: ShardId) -> tuple[Floor, RecoverySetView]:
    from nereus.adapters.offline.checkpoint_catalog import recovery_floor
    from nereus.cli.commands.checkpoint_documents import RecoveryMember, RecoverySetView

    objects = env.object_store()
    floor = recovery_floor(objects, shard, env.config.checkpoints.keep)
    log_start = None
    if env.config.route(shard.route).log != "file":
        log_start = 0  # brokers keep their own retention; nereus does not prune them
    elif env.layout.shard_log(shard).is_dir():
        segments = env.file_log(shard, create=False).segments()
        log_start = segments[0][0] if segments else 0
    view = RecoverySetView(
        shard=str(shard), keep=env.config.checkpoints.keep, object_store=objects.description,
        floor_position=floor.position, floor_objects=sorted(floor.external_objects),
        log_start_position=log_start,
        members=[RecoveryMember(checkpoint_id=m.checkpoint_id,
                                applied_position=m.applied_position, digest=m.digest,
                                created_at=m.created_at) for m in floor.members])
    return floor, view


@app.command("show")
def show(ctx: typer.Context, shard_name: ShardArg) -> None:
    """The Recovery Set's members and the Recovery Floor they impose."""
    env: Env = ctx.obj
    shard = env.shard(shard_name)
    _, view = _floor_view(env, shard)
    data = msgspec.to_builtins(view)

    def human(out: Console) -> None:
        out.print(f"Recovery Set of {shard}: {len(data['members'])} of at most {data['keep']} "
                  f"checkpoint(s) in {data['object_store']}")
        for m in data["members"]:
            out.print(f"  {m['checkpoint_id']}  applied {m['applied_position']}  "
                      f"{m['created_at']}")
        out.print(f"Recovery Floor: log position {data['floor_position']}, "
                  f"{len(data['floor_objects'])} external object(s); log starts at "
                  f"{data['log_start_position']}")

    env.output.emit(data, human)


@app.command("verify")
def verify_set(ctx: typer.Context, shard_name: ShardArg) -> None:
    """Verify every member, that log retention covers the floor, that objects exist."""
    from nereus.adapters.offline.checkpoint_restore import verify_entry
    from nereus.checkpoint.verify import Check
    from nereus.cli.commands.checkpoint_documents import MemberReport, RecoverySetVerification
    from nereus.cli.verdict import emit_verdict

    env: Env = ctx.obj
    shard = env.shard(shard_name)
    floor, view = _floor_view(env, shard)
    objects = env.object_store()
    checks: list[Check] = []
    if not floor.members:
        checks.append(Check(name="members", ok=False, detail=f"no catalogued checkpoint for "
                            f"{shard}: recovery would have to replay the whole log"))
    members = []
    for member in floor.members:
        with env.output.progress(f"verifying {member.checkpoint_id}", None) as advance:
            report = verify_entry(objects, member, advance)
        failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok]
        checks.append(Check(name=f"member {member.checkpoint_id}", ok=report.ok,
                            detail="; ".join(failed) or f"all {len(report.checks)} checks "
                            "passed"))
        members.append(MemberReport(checkpoint_id=member.checkpoint_id, ok=report.ok,
                                    checks=report.checks))
    log_start = view.log_start_position
    if log_start is None:
        checks.append(Check(name="log_retention", ok=False,
                            detail=f"no Shard Log for {shard} in this home"))
    else:
        checks.append(Check(name="log_retention", ok=log_start <= floor.position,
                            detail=f"log starts at {log_start}, floor at {floor.position}"))
    missing = [key for key in sorted(floor.external_objects) if objects.head(key) is None]
    checks.append(Check(name="external_objects", ok=not missing,
                        detail=f"missing: {', '.join(missing)}" if missing else
                        f"all {len(floor.external_objects)} referenced objects exist"))
    result = RecoverySetVerification(
        **msgspec.structs.asdict(view), ok=all(c.ok for c in checks), checks=checks,
        member_reports=members)
    emit_verdict(env, result, f"Recovery Set of {shard}")
