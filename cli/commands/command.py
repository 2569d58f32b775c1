"""``nereus command show``: a command's result at any later time, by its id.

A receipt printed QUEUED (no ``--wait``, or a ``--wait`` that ran out: exit 6) names the
command id; this answers what became of it — APPLIED with the shard's result, still
QUEUED in the Shard Log, or unknown here — with the engine running or not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.offline.command_lookup import CommandStatus

app = typer.Typer(help="What became of a queued command.", no_args_is_help=True)


@app.command("show")
def show(
    ctx: typer.Context,
    command_id: Annotated[str, typer.Argument(
        metavar="COMMAND_ID", help="A receipt's command_id (or an operator mutation's "
        "idempotency_key).")],
) -> None:
    """A command's result: APPLIED (exit 0; 1 if REJECTED or STALE), QUEUED and not applied
    yet (exit 6), or not found on any shard (exit 3). Works with the engine down."""
    import msgspec

    from nereus.adapters.offline.command_lookup import CommandStatus
    from nereus.cli.output import Answered
    from nereus.errors import ExitCode, UsageError
    from nereus.terminal_text import find_control

    env: Env = ctx.obj
    if not command_id or find_control(command_id) is not None:
        raise UsageError("COMMAND_ID must be non-empty printable text")
    status = (msgspec.convert(env.admin().get(f"/v1/commands/{_quote(command_id)}"),
                              CommandStatus)
              if env.engine_running() else _offline(env, command_id))
    data = msgspec.to_builtins(status)

    def human(out: Console) -> None:
        if data["evidence"] == "QUEUED":
            out.print(f"command {data['command_id']} is QUEUED on shard {data['shard']} at "
                      f"position {data['source_position']}: durable in the Shard Log, not "
                      "applied yet")
            return
        why = f" ({data['reason']}: {data['detail']})" if data["reason"] else ""
        what = f" for {data['delay_message_id']}" if data["delay_message_id"] else ""
        out.print(f"{data['kind']}{what} {data['result']} on shard {data['shard']} at "
                  f"position {data['source_position']}{why}")

    env.output.emit(data, human)
    if status.evidence == "QUEUED":
        raise Answered(ExitCode.RESULT_NOT_KNOWN)
    if status.result in ("REJECTED", "STALE"):
        raise Answered(ExitCode.NO)


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def _offline(env: Env, command_id: str) -> CommandStatus:
    """Each shard's database read-only, then the part of its log not applied yet."""
    from nereus.adapters.offline.command_lookup import applied_result, command_view, queued_position
    from nereus.errors import NotFound
    from nereus.operator.plan import next_position
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore

    shards = [ShardId(route.name, partition) for route in env.config.routes.values()
              for partition in range(route.partitions)]
    starts: dict[ShardId, int] = {}
    for shard in shards:
        path = env.layout.shard_state(shard)
        starts[shard] = 0
        if not (path / "CURRENT").exists():
            continue
        with ShardStore.open(path, read_only=True) as store:
            result = applied_result(store, command_id)
            if result is not None:
                return command_view(command_id, str(shard), result, None)
            starts[shard] = next_position(store)
    for shard in shards:
        try:
            log = env.shard_log(shard, create=False)
        except NotFound:
            continue
        queued = queued_position(log, starts[shard], command_id)
        if queued is not None:
            return command_view(command_id, str(shard), None, queued)
    raise NotFound(f"no command {command_id} on any shard of {env.home}: neither applied nor "
                   "queued", hint="check the id (a receipt's command_id, or an operator "
                   "mutation's idempotency_key)")
