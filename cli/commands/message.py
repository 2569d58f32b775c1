"""``nereus message``: schedule, cancel and reschedule Delayed Messages.

These prepare the command (ids and bytes fixed first) and queue it to the shard's log.
The printed receipt is QUEUED evidence: the Shard Log durably holds the command; the
shard has not necessarily applied it yet.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.client import Prepared, Queued

app = typer.Typer(help="Schedule, cancel and reschedule delayed messages.", no_args_is_help=True)

WaitOption = Annotated[bool, typer.Option(
    "--wait", help="Wait for the applied result (needs the engine running).")]
RouteOption = Annotated[str, typer.Option("--route", help="Ingress route.")]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _when(deliver_at: str | None, delay: str | None, *, what: str) -> int:
    from nereus.errors import UsageError
    from nereus.timespec import parse_duration_ms, parse_time_ms

    if (deliver_at is None) == (delay is None):
        raise UsageError(f"{what}: give exactly one of --deliver-at TIME or --delay DURATION")
    if deliver_at is not None:
        return parse_time_ms(deliver_at, field="--deliver-at")
    assert delay is not None
    return _now_ms() + parse_duration_ms(delay, field="--delay")


def _check_id(value: str, flag: str) -> str:
    from nereus.errors import UsageError

    if not value or "\x00" in value or len(value.encode()) > 256:
        raise UsageError(f"{flag} {value!r}: ids are 1-256 bytes without NUL characters")
    return value


def _route(env: Env, name: str) -> Any:
    from nereus.client import RouteRef

    route = env.config.route(name)
    return RouteRef(route.name, route.partitions)


def _receipt(item: Queued) -> dict[str, Any]:
    from nereus.timespec import format_time_ms

    prepared = item.prepared
    return {
        "kind": prepared.kind,
        "delay_message_id": prepared.delay_message_id,
        "command_id": prepared.command_id,
        "shard": str(prepared.shard),
        "source_position": item.position,
        "broker_time": format_time_ms(item.broker_ms),
        "evidence": item.evidence,
    }


def _queue_and_report(env: Env, prepared: Prepared, wait: bool) -> None:
    from nereus.client import queue
    from nereus.errors import EngineUnreachable

    if wait:
        # --wait reports APPLIED evidence, which only a running engine produces.
        sock = env.layout.run / "admin.sock"
        if not sock.exists():
            raise EngineUnreachable(
                f"--wait needs the engine, and no engine answers at {sock}",
                hint="start it with `nereus engine start`, or drop --wait for the QUEUED receipt",
            )
    queued = queue([prepared], env.file_log)[0]
    data = _receipt(queued)

    def human(out: Console) -> None:
        out.print(
            f"{data['kind']} {data['delay_message_id']} queued on shard {data['shard']} at "
            f"position {data['source_position']}  [dim](QUEUED: durable in the Shard Log, "
            f"not yet applied)[/dim]"
        )
        out.print(f"  command id {data['command_id']}")

    env.output.emit(data, human)


@app.command("schedule")
def schedule(
    ctx: typer.Context,
    lane: Annotated[str, typer.Option("--lane", help="Destination lane (from nereus.toml).")],
    deliver_at: Annotated[str | None, typer.Option(
        "--deliver-at", help="Not-before time: ISO-8601 with zone, or epoch ms.")] = None,
    delay: Annotated[str | None, typer.Option(
        "--delay", help="Not-before time from now: 30s, 5m, 2h, 1d.")] = None,
    expire_at: Annotated[str | None, typer.Option(
        "--expire-at", help="No new publish attempt after this time.")] = None,
    key: Annotated[str | None, typer.Option("--key", help="Message key.")] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="A header K=V (repeatable).")] = None,
    payload: Annotated[str | None, typer.Option("--payload", help="Payload text.")] = None,
    payload_file: Annotated[Path | None, typer.Option(
        "--payload-file", help="Read the payload from a file.")] = None,
    message_id: Annotated[str | None, typer.Option(
        "--id", help="The delayMessageId (default: a new UUID).")] = None,
    route: RouteOption = "default",
    wait: WaitOption = False,
) -> None:
    """Schedule a message for publication not before a time."""
    from nereus.client import prepare_schedule
    from nereus.errors import NotFound, UsageError
    from nereus.timespec import parse_time_ms

    env: Env = ctx.obj
    deliver_at_ms = _when(deliver_at, delay, what="schedule")
    expire_at_ms = None if expire_at is None else parse_time_ms(expire_at, field="--expire-at")
    if expire_at_ms is not None and expire_at_ms < deliver_at_ms:
        raise UsageError("--expire-at is before the delivery time: it could never be published")
    config = env.config
    if lane not in config.lanes:
        known = ", ".join(sorted(config.lanes)) or "none"
        raise NotFound(f"no lane {lane!r} in {config.source} (configured: {known})")
    headers: dict[str, str] = {}
    for item in header or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--header {item!r}: expected K=V")
        headers[name] = value
    if payload is not None and payload_file is not None:
        raise UsageError("give --payload or --payload-file, not both")
    if payload_file is not None:
        try:
            body = payload_file.read_bytes()
        except OSError as exc:
            raise UsageError(f"--payload-file {payload_file}: {exc.strerror}") from None
    else:
        body = (payload or "").encode()
    limit = config.limits.max_inline_payload_bytes
    if len(body) > limit:
        raise UsageError(
            f"the payload is {len(body)} bytes, over the inline limit of {limit} "
            f"({config.source} [shard] max_inline_payload_bytes)",
            hint="raise the limit, or shrink the payload; the object-store payload path is not "
            "in this build yet",
        )
    prepared = prepare_schedule(
        _route(env, route), command_id=str(uuid.uuid4()),
        delay_message_id=_check_id(message_id or str(uuid.uuid4()), "--id"), lane=lane,
        deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms, key=key, headers=headers,
        payload=body,
    )
    _queue_and_report(env, prepared, wait)


@app.command("cancel")
def cancel(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The delayMessageId.")],
    route: RouteOption = "default",
    wait: WaitOption = False,
) -> None:
    """Cancel a message; wins only before its Publish Admission."""
    from nereus.client import prepare_cancel

    env: Env = ctx.obj
    prepared = prepare_cancel(
        _route(env, route), command_id=str(uuid.uuid4()),
        delay_message_id=_check_id(message_id, "ID"),
    )
    _queue_and_report(env, prepared, wait)


@app.command("reschedule")
def reschedule(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The delayMessageId.")],
    deliver_at: Annotated[str | None, typer.Option(
        "--deliver-at", help="New not-before time: ISO-8601 with zone, or epoch ms.")] = None,
    delay: Annotated[str | None, typer.Option(
        "--delay", help="New not-before time from now: 30s, 5m, 2h, 1d.")] = None,
    expire_at: Annotated[str | None, typer.Option(
        "--expire-at", help="No new publish attempt after this time.")] = None,
    route: RouteOption = "default",
    wait: WaitOption = False,
) -> None:
    """Move a message to a new time (a new generation); only before admission."""
    from nereus.client import prepare_reschedule
    from nereus.timespec import parse_time_ms

    env: Env = ctx.obj
    deliver_at_ms = _when(deliver_at, delay, what="reschedule")
    prepared = prepare_reschedule(
        _route(env, route), command_id=str(uuid.uuid4()),
        delay_message_id=_check_id(message_id, "ID"), deliver_at_ms=deliver_at_ms,
        expire_at_ms=None if expire_at is None else parse_time_ms(expire_at, field="--expire-at"),
    )
    _queue_and_report(env, prepared, wait)
