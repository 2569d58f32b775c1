"""``nereus message``: schedule, cancel and reschedule Delayed Messages.

These prepare the command (ids and bytes fixed first) and submit it through the home's
``CommandSink``: the running engine, or straight to the shard's Shard Log. The printed
receipt is QUEUED evidence (the Shard Log durably holds the command; the shard has not
necessarily applied it yet), or APPLIED with the result under ``--wait``.

A ``--payload-file`` above ``[shard] max_inline_payload_bytes`` takes the large-payload
path (``nereus.adapters.offline.large_payload``: reserve, upload, attest, commit, schedule).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli import message_input, submission
from nereus.cli.context import Env
from nereus.cli.large_payload_input import payload_source, schedule_large

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.views import MessageDetail


app = typer.Typer(help="Schedule, cancel and reschedule delayed messages.", no_args_is_help=True)

WaitOption = Annotated[bool, typer.Option(
    "--wait", help="Wait for the applied result (needs the engine running).")]
RouteOption = Annotated[str | None, typer.Option(
    "--route", help="Ingress route (default: the only configured route, else default).")]
CommandIdOption = Annotated[str | None, typer.Option(
    "--command-id", help="The command's id: a retry with the same id and the same content "
    "returns the first result (exit 0) instead of acting twice; different content under it "
    "is REJECTED DUPLICATE_CONFLICT.")]




@app.command("schedule")
def schedule(
    ctx: typer.Context,
    lane: Annotated[str | None, typer.Option(
        "--lane", help="Destination lane (from nereus.toml).")] = None,
    deliver_at: Annotated[str | None, typer.Option(
        "--deliver-at", help="Not-before time: ISO-8601 with zone, or epoch ms.")] = None,
    delay: Annotated[str | None, typer.Option(
        "--delay", help="Not-before time from now: 30s, 5m, 2h, 1d.")] = None,
    expire_at: Annotated[str | None, typer.Option(
        "--expire-at",
        help="Expire unless first admitted by this time (an admitted message's retries "
             "go on).")] = None,
    key: Annotated[str | None, typer.Option("--key", help="Message key.")] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="A header K=V (repeatable).")] = None,
    payload: Annotated[str | None, typer.Option("--payload", help="Payload text.")] = None,
    payload_file: Annotated[Path | None, typer.Option(
        "--payload-file", help="Read the payload from a file; above [shard] "
        "max_inline_payload_bytes it is uploaded to the object store and referenced.")] = None,
    message_id: Annotated[str | None, typer.Option(
        "--id", help="The delayMessageId (default: a new UUID). Refused, so that no two "
        "ids print alike: an empty id, a control character, an invisible or space-like "
        "character (zero-width space or joiner, no-break or other non-ASCII space, soft "
        "hyphen, format characters), a space at either end or only spaces; a space inside "
        "is fine. Batch ids and --command-id likewise.")] = None,
    batch: Annotated[Path | None, typer.Option(
        "--batch", help="JSON lines, one message each: id, lane, deliver_at or delay, "
        "expire_at, key, headers, payload. Queued with group commit. `-` reads standard "
        "input (a file named - is given by its full path); a batch that stops part-way "
        "writes a retry file next to its file, or under the home's batch/ folder.")] = None,
    route: RouteOption = None,
    wait: WaitOption = False,
    command_id: Annotated[str | None, typer.Option(
        "--command-id", help="The command's id (default: derived from the content, so an "
        "identical retry is the same command).")] = None,
) -> None:
    """Schedule a message for publication not before a time.

    Retries are safe: an identical schedule (same --id, lane, time, expiry, key, headers
    and payload) is the same command, applied once; a retry returns the first result with
    exit 0. A different schedule for an existing --id is REJECTED MESSAGE_EXISTS.
    A command id is remembered while its message exists and for the lane's dedup_window
    (default 7d) after the message ended; reused after that it is a NEW command (a new
    message if none has the --id any more). Give --deliver-at, not --delay, to retry (a
    delay is counted from each run's now)."""
    from nereus.errors import UsageError

    env: Env = ctx.obj
    route = env.config.route_name(route)
    if batch is not None:
        if any(v is not None for v in (lane, deliver_at, delay, payload, payload_file,
                                       message_id, key, expire_at)) or header:
            raise UsageError("--batch takes every field from the file; give no other message flags")
        if command_id is not None:
            raise UsageError("--command-id names one command; a batch derives one per line")
        submission.schedule_batch(env, batch, route, wait)
        return
    _schedule_one(env, lane=lane, deliver_at=deliver_at, delay=delay, expire_at=expire_at,
                  key=key, header=header, payload=payload, payload_file=payload_file,
                  message_id=message_id, route=route, wait=wait, command_id=command_id)


def _schedule_one(env: Env, *, lane: str | None, deliver_at: str | None, delay: str | None,
                  expire_at: str | None, key: str | None, header: list[str] | None,
                  payload: str | None, payload_file: Path | None, message_id: str | None,
                  route: str, wait: bool, command_id: str | None) -> None:
    """``message schedule`` of one message (not ``--batch``)."""
    from nereus.errors import UsageError
    from nereus.timespec import parse_time_ms

    if lane is None:
        raise UsageError("--lane is required (or --batch FILE)")
    deliver_at_ms = message_input.deliver_time(deliver_at, delay, what="schedule")
    expire_at_ms = None if expire_at is None else parse_time_ms(expire_at, field="--expire-at")
    headers: dict[str, str] = {}
    for item in header or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--header {item!r}: expected K=V")
        headers[name] = value
    if payload is not None and payload_file is not None:
        raise UsageError("give --payload or --payload-file, not both")
    if payload_file is not None:
        with payload_source(env, payload_file) as (body, large):
            if large is not None:
                schedule_large(env, large, lane=lane, deliver_at_ms=deliver_at_ms,
                                expire_at_ms=expire_at_ms, key=key, headers=headers,
                                message_id=message_id, route=route, wait=wait)
                return
    else:
        message_input.check_unicode(payload or "", "--payload")
        body = (payload or "").encode()
    prepared = message_input.prepare_one(env, lane=lane, deliver_at_ms=deliver_at_ms,
                            expire_at_ms=expire_at_ms, key=key, headers=headers, body=body,
                            message_id=message_id, route=route, command_id=command_id)
    submission.queue_and_report(env, prepared, wait)


@app.command("cancel")
def cancel(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The delayMessageId.")],
    route: RouteOption = None,
    wait: WaitOption = False,
    command_id: CommandIdOption = None,
) -> None:
    """Cancel a message; wins only before its Publish Admission.

    To retry safely give --command-id: the same id is one command, applied once."""
    from nereus.client import prepare_cancel

    env: Env = ctx.obj
    route = env.config.route_name(route)
    delay_message_id = message_input.check_id(env, message_id, "ID")
    prepared = prepare_cancel(
        message_input.route_ref(env, route),
        command_id=message_input.own_command_id(env, command_id),
        delay_message_id=delay_message_id, shard=env.message_shard(route, delay_message_id),
    )
    submission.queue_and_report(env, prepared, wait)


@app.command("reschedule")
def reschedule(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The delayMessageId.")],
    deliver_at: Annotated[str | None, typer.Option(
        "--deliver-at", help="New not-before time: ISO-8601 with zone, or epoch ms.")] = None,
    delay: Annotated[str | None, typer.Option(
        "--delay", help="New not-before time from now: 30s, 5m, 2h, 1d.")] = None,
    expire_at: Annotated[str | None, typer.Option(
        "--expire-at",
        help="Expire unless first admitted by this time (an admitted message's retries "
             "go on).")] = None,
    route: RouteOption = None,
    wait: WaitOption = False,
    command_id: CommandIdOption = None,
) -> None:
    """Move a message to a new time (a new generation); only before admission.

    To retry safely give --command-id: the same id is one command, applied once."""
    from nereus.client import prepare_reschedule
    from nereus.timespec import parse_time_ms

    env: Env = ctx.obj
    route = env.config.route_name(route)
    deliver_at_ms = message_input.deliver_time(deliver_at, delay, what="reschedule")
    delay_message_id = message_input.check_id(env, message_id, "ID")
    prepared = prepare_reschedule(
        message_input.route_ref(env, route),
        command_id=message_input.own_command_id(env, command_id),
        delay_message_id=delay_message_id, deliver_at_ms=deliver_at_ms,
        expire_at_ms=None if expire_at is None else parse_time_ms(expire_at, field="--expire-at"),
        shard=env.message_shard(route, delay_message_id),
    )
    submission.queue_and_report(env, prepared, wait)


@app.command("show")
def show(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The delayMessageId.")],
    barrier: Annotated[bool, typer.Option(
        "--barrier", help="Append a query barrier first, so the answer is conclusive.")] = False,
    route: RouteOption = None,
) -> None:
    """Queued vs applied vs message state, attempts and their evidence. Without a running
    engine the shard's state is read offline (read-only); --barrier needs the engine."""
    env: Env = ctx.obj
    route = env.config.route_name(route)
    if barrier or env.engine_running():
        data = env.admin().message(message_id, route=route, barrier=barrier)
    else:
        import msgspec

        data = msgspec.to_builtins(_offline_message(env, route, message_id))

    def human(out: Console) -> None:
        from rich.table import Table

        out.print(f"[bold]{data['delay_message_id']}[/bold] on {data['shard']}: "
                  f"[bold]{data['state']}[/bold] (generation {data['generation']}, lane "
                  f"{data['lane']})")
        out.print(f"  deliver at {data['deliver_at']}  action at {data['action_at']}"
                  + (f"  expire at {data['expire_at']}" if data["expire_at"] else ""))
        conclusive = "conclusive" if data["conclusive"] else (
            "not conclusive: commands may be queued but not applied (use --barrier)")
        out.print(f"  applied up to position {data['applied_position']} of "
                  f"{data['log_end_position']}: {conclusive}")
        if data["detail"]:
            out.print(f"  {data['detail']}")
        if data["attempts"]:
            table = Table("attempt", "no", "state", "evidence")
            for attempt in data["attempts"]:
                table.add_row(attempt["attempt_id"], str(attempt["attempt_no"]),
                              attempt["state"], attempt["evidence"] or "-")
            out.print(table)

    env.output.emit(data, human)


@app.command("explain")
def explain(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The delayMessageId.")],
    route: RouteOption = None,
) -> None:
    """Why is it waiting? Every gate of the scheduler (seed 000) in order, with its value
    for this message now, and the first one that holds it back (needs the engine: readiness,
    Trusted UTC, claims and permits are the running scheduler's). A wait is not proof that
    the message was or was not published."""
    env: Env = ctx.obj
    route = env.config.route_name(route)
    data = env.admin().explain(message_id, route=route)

    def human(out: Console) -> None:
        from rich.table import Table

        out.print(f"[bold]{data['delay_message_id']}[/bold] on {data['shard']}: "
                  f"[bold]{data['state']}[/bold] (lane {data['lane']}, actionAt "
                  f"{data['action_at']}; Trusted UTC earliest {data['trusted_earliest']})")
        table = Table("gate", "holds", "value")
        for gate in data["gates"]:
            table.add_row(gate["gate"], "[red]holds[/red]" if gate["holds"] else "ok",
                          gate["detail"])
        out.print(table)
        if data["held_by"] is None:
            out.print(f"[green]nothing holds it[/green]: {data['why']}")
        else:
            out.print(f"held by [bold]{data['held_by']}[/bold]: {data['why']}")
        for line in data.get("attempts") or []:
            out.print(f"attempt {line}", soft_wrap=True, markup=False)

    env.output.emit(data, human)


def _offline_message(env: Env, route: str, message_id: str) -> MessageDetail:
    """``message show`` from the shard's database opened read-only, beside its log's end."""
    from nereus.errors import NotFound
    from nereus.state.store import ShardStore
    from nereus.views import find_message, message_detail, message_not_found

    shard = env.message_shard(route, message_id)
    try:
        end = env.shard_log(shard, create=False).end_position()
    except NotFound:
        raise NotFound(f"no message {message_id} on shard {shard}: nothing was queued to it "
                       "yet") from None
    path = env.layout.shard_state(shard)
    if not (path / "CURRENT").exists():
        raise NotFound(f"no message {message_id} on shard {shard}: nothing applied yet "
                       f"(log end {end}; the engine applies the log)",
                       hint="start the engine: `nereus engine start`")
    with ShardStore.open(path, read_only=True) as store:
        applied = store.applied_position()
        message = find_message(store, message_id)
        if message is None:
            raise message_not_found(message_id, str(shard), applied, end)
        return message_detail(store, message, str(shard), applied_position=applied,
                              log_end_position=end, barrier_position=None)


@app.command("list")
def list_messages(
    ctx: typer.Context,
    shard: Annotated[str | None, typer.Option("--shard", help="Only this shard.")] = None,
    state: Annotated[str | None, typer.Option(
        "--state", help="Only this state (SCHEDULED, PUBLISHED, UNCERTAIN, ...).")] = None,
    lane: Annotated[str | None, typer.Option("--lane", help="Only this lane.")] = None,
    limit: Annotated[int, typer.Option(
        "--limit", min=1, max=100_000, help="At most this many on the page.")] = 100,
    after: Annotated[str | None, typer.Option(
        "--after", metavar="CURSOR", help="The next page: the next_cursor a page printed "
        "(give the same filters).")] = None,
) -> None:
    """List messages, one page at a time, in shard then id order (needs the engine).

    A page reads at most --limit messages plus a bounded number the filters turn away, so
    it may be short, even empty, and still name a next page: follow next_cursor with
    --after until it is null."""
    env: Env = ctx.obj
    data = env.admin().get("/v1/messages", shard=shard, state=state.upper() if state else None,
                           lane=lane, limit=limit, after=after)

    def human(out: Console) -> None:
        from rich.table import Table

        table = Table("id", "shard", "lane", "state", "deliver at", "gen")
        for m in data["messages"]:
            table.add_row(m["delay_message_id"], m["shard"], m["lane"], m["state"],
                          m["deliver_at"], str(m["generation"]))
        out.print(table)
        if data.get("next_cursor"):
            flags = "".join(f" {flag} {value}" for flag, value in (
                ("--shard", shard), ("--state", state), ("--lane", lane),
                ("--limit", limit if limit != 100 else None)) if value is not None)
            out.print(f"next page: nereus message list{flags} --after {data['next_cursor']}",
                      markup=False, highlight=False)

    env.output.emit(data, human)
