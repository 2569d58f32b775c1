"""``nereus message``: schedule, cancel and reschedule Delayed Messages.

These prepare the command (ids and bytes fixed first) and queue it to the shard's log.
The printed receipt is QUEUED evidence: the Shard Log durably holds the command; the
shard has not necessarily applied it yet.

A ``--payload-file`` above ``[shard] max_inline_payload_bytes`` takes the large-payload
path, in this order and all on the message's shard: PAYLOAD_RESERVE (size, SHA-256, an
expiry), the upload to the object store, the attestation (the stored object's size and
SHA-256 must be the reserved ones), PAYLOAD_COMMIT, then the SCHEDULE naming the payload
(``payload_ref``) with an empty inline payload. The reservation is queued before the
upload so an object in ``payloads/`` always has a stage in some log: ``nereus payload gc``
relies on that. A run that stops half-way leaves a reservation that expires and an object
that gc collects.
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

    from nereus.client import Prepared, Queued, RouteRef

app = typer.Typer(help="Schedule, cancel and reschedule delayed messages.", no_args_is_help=True)

WaitOption = Annotated[bool, typer.Option(
    "--wait", help="Wait for the applied result (needs the engine running).")]
RouteOption = Annotated[str, typer.Option("--route", help="Ingress route.")]

RESERVATION_TTL_MS = 3_600_000  # an abandoned large-payload reservation expires after this
_CHUNK = 1 << 20


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _when(deliver_at: str | None, delay: str | None, *, what: str,
          names: tuple[str, str] = ("--deliver-at", "--delay")) -> int:
    """The delivery time from exactly one of a time or a delay; ``names`` label errors."""
    from nereus.errors import UsageError
    from nereus.timespec import parse_duration_ms, parse_time_ms

    if (deliver_at is None) == (delay is None):
        raise UsageError(f"{what}: give exactly one of {names[0]} TIME or {names[1]} DURATION")
    if deliver_at is not None:
        return parse_time_ms(deliver_at, field=names[0])
    assert delay is not None
    return _now_ms() + parse_duration_ms(delay, field=names[1])


def _check_id(value: str, flag: str) -> str:
    from nereus.errors import UsageError

    if not value or "\x00" in value or len(value.encode()) > 256:
        raise UsageError(f"{flag} {value!r}: ids are 1-256 bytes without NUL characters")
    return value


def _route(env: Env, name: str) -> RouteRef:
    return env.route_ref(name)


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


def _submit(env: Env, prepared: list[Prepared], wait: bool) -> list[dict[str, Any]]:
    """Queue through the engine when it runs (optionally waiting), else straight to the log."""
    import base64

    from nereus.client import queue
    from nereus.errors import EngineUnreachable

    if env.engine_running():
        body = {
            "records": [{"shard": str(p.shard), "data": base64.b64encode(p.data).decode()}
                        for p in prepared],
            "wait_ms": 30_000 if wait else 0,
        }
        answer = env.admin().post("/v1/commands", body, timeout=120)
        out = []
        for item, receipt in zip(prepared, answer["receipts"], strict=True):
            data = {"kind": item.kind, "delay_message_id": item.delay_message_id,
                    "command_id": item.command_id, **receipt}
            out.append(data)
        return out
    if wait:
        raise EngineUnreachable(
            f"--wait needs the engine, and none runs on {env.home}",
            hint="start it with `nereus engine start`, or drop --wait for the QUEUED receipt",
        )
    return [_receipt(q) for q in queue(prepared, env.command_log)]


def _queue_and_report(env: Env, prepared: Prepared, wait: bool,
                      extra: dict[str, Any] | None = None) -> None:
    data = _submit(env, [prepared], wait)[0]
    data.update(extra or {})

    def human(out: Console) -> None:
        if data["evidence"] == "APPLIED":
            why = f" ({data['reason']}: {data['detail']})" if data.get("reason") else ""
            out.print(f"{data['kind']} {data['delay_message_id']} {data['result']} on shard "
                      f"{data['shard']} at position {data['source_position']}{why}")
        else:
            out.print(
                f"{data['kind']} {data['delay_message_id']} queued on shard {data['shard']} at "
                f"position {data['source_position']}  [dim](QUEUED: durable in the Shard Log, "
                f"not yet applied)[/dim]"
            )
        out.print(f"  command id {data['command_id']}")
        if data.get("payload_id"):
            out.print(f"  payload {data['payload_id']}: {data['payload_bytes']} bytes, sha256 "
                      f"{data['payload_sha256'][:16]}.., object {data['payload_object']}")

    env.output.emit(data, human)
    if data.get("result") == "REJECTED":
        raise typer.Exit(1)


def _check_message(env: Env, *, lane: str, deliver_at_ms: int,
                   expire_at_ms: int | None) -> None:
    from nereus.errors import NotFound, UsageError

    config = env.config
    if lane not in config.lanes:
        known = ", ".join(sorted(config.lanes)) or "none"
        raise NotFound(f"no lane {lane!r} in {config.source} (configured: {known})")
    if expire_at_ms is not None and expire_at_ms < deliver_at_ms:
        raise UsageError("expire_at is before the delivery time: it could never be published")


def _prepare_one(
    env: Env, *, lane: str, deliver_at_ms: int, expire_at_ms: int | None, key: str | None,
    headers: dict[str, str], body: bytes, message_id: str | None, route: str,
) -> Prepared:
    from nereus.client import prepare_schedule
    from nereus.errors import UsageError

    config = env.config
    _check_message(env, lane=lane, deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms)
    limit = config.limits.max_inline_payload_bytes
    if len(body) > limit:
        raise UsageError(
            f"the payload is {len(body)} bytes, over the inline limit of {limit} "
            f"(shard.max_inline_payload_bytes in {config.source})",
            hint="schedule it on its own with --payload-file FILE: above the inline limit that "
            "takes the object-store (large-payload) path",
        )
    return prepare_schedule(
        _route(env, route), command_id=str(uuid.uuid4()),
        delay_message_id=_check_id(message_id or str(uuid.uuid4()), "id"), lane=lane,
        deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms, key=key, headers=headers,
        payload=body,
    )


def _batch_line(env: Env, number: int, line: str, route: str) -> Prepared:
    import json

    from nereus.errors import NereusError, UsageError
    from nereus.timespec import parse_time_ms

    where = f"line {number}"
    try:
        item = json.loads(line)
    except ValueError as exc:
        raise UsageError(f"{where}: not JSON ({exc})") from None
    if not isinstance(item, dict):
        raise UsageError(f"{where}: expected a JSON object")
    unknown = set(item) - {"id", "lane", "deliver_at", "delay", "expire_at", "key", "headers",
                           "payload"}
    if unknown:
        raise UsageError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    try:
        if not isinstance(item.get("lane"), str):
            raise UsageError("field lane: a lane name is required")
        deliver, delay = item.get("deliver_at"), item.get("delay")
        deliver_at_ms = _when(None if deliver is None else str(deliver),
                              None if delay is None else str(delay),
                              what="field deliver_at/delay",
                              names=("field deliver_at", "field delay"))
        expire = item.get("expire_at")
        headers = item.get("headers") or {}
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise UsageError("field headers: expected an object of strings")
        payload = item.get("payload", "")
        if not isinstance(payload, str):
            raise UsageError("field payload: expected a string")
        key = item.get("key")
        if key is not None and not isinstance(key, str):
            raise UsageError("field key: expected a string")
        return _prepare_one(
            env, lane=item["lane"], deliver_at_ms=deliver_at_ms,
            expire_at_ms=None if expire is None else parse_time_ms(str(expire),
                                                                   field="field expire_at"),
            key=key, headers=headers, body=payload.encode(),
            message_id=None if item.get("id") is None else str(item["id"]), route=route,
        )
    except NereusError as exc:
        exc.message = f"{where}: {exc.message}"
        raise


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
        "--expire-at", help="No new publish attempt after this time.")] = None,
    key: Annotated[str | None, typer.Option("--key", help="Message key.")] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="A header K=V (repeatable).")] = None,
    payload: Annotated[str | None, typer.Option("--payload", help="Payload text.")] = None,
    payload_file: Annotated[Path | None, typer.Option(
        "--payload-file", help="Read the payload from a file; above [shard] "
        "max_inline_payload_bytes it is uploaded to the object store and referenced.")] = None,
    message_id: Annotated[str | None, typer.Option(
        "--id", help="The delayMessageId (default: a new UUID).")] = None,
    batch: Annotated[Path | None, typer.Option(
        "--batch", help="JSON lines, one message each: id, lane, deliver_at or delay, "
        "expire_at, key, headers, payload. Queued with group commit.")] = None,
    route: RouteOption = "default",
    wait: WaitOption = False,
) -> None:
    """Schedule a message for publication not before a time."""
    from nereus.errors import UsageError
    from nereus.timespec import parse_time_ms

    env: Env = ctx.obj
    if batch is not None:
        if any(v is not None for v in (lane, deliver_at, delay, payload, payload_file,
                                       message_id, key, expire_at)) or header:
            raise UsageError("--batch takes every field from the file; give no other message flags")
        _schedule_batch(env, batch, route, wait)
        return
    if lane is None:
        raise UsageError("--lane is required (or --batch FILE)")
    deliver_at_ms = _when(deliver_at, delay, what="schedule")
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
        with _payload_source(env, payload_file) as (body, large):
            if large is not None:
                _schedule_large(env, large, lane=lane, deliver_at_ms=deliver_at_ms,
                                expire_at_ms=expire_at_ms, key=key, headers=headers,
                                message_id=message_id, route=route, wait=wait)
                return
    else:
        body = (payload or "").encode()
    prepared = _prepare_one(env, lane=lane, deliver_at_ms=deliver_at_ms,
                            expire_at_ms=expire_at_ms, key=key, headers=headers, body=body,
                            message_id=message_id, route=route)
    _queue_and_report(env, prepared, wait)


@contextmanager
def _payload_source(env: Env, path: Path) -> Iterator[tuple[bytes, Path | None]]:
    """(inline bytes, None) at or below the inline limit, else (b"", a file to upload).

    A regular file above the limit is never read into memory here. A pipe or other stream
    is read, and spooled to a temporary file if it turns out large.
    """
    import shutil
    import stat
    import tempfile

    from nereus.errors import UsageError

    limit = env.config.limits.max_inline_payload_bytes
    try:
        info = path.stat()
        large_file = stat.S_ISREG(info.st_mode) and info.st_size > limit
        body = b"" if large_file else path.read_bytes()
    except OSError as exc:
        raise UsageError(f"--payload-file {path}: {exc.strerror}") from None
    if large_file:
        yield b"", path
        return
    if len(body) <= limit:
        yield body, None
        return
    scratch = Path(tempfile.mkdtemp(prefix="nereus-payload-"))
    try:
        spooled = scratch / "payload"
        spooled.write_bytes(body)
        del body
        yield b"", spooled
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _hash_file(env: Env, path: Path, size_hint: int) -> tuple[int, str]:
    """Size and SHA-256 of ``path``, streamed (progress bar on stderr)."""
    import hashlib

    from nereus.errors import UsageError

    digest = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as handle, env.output.progress("hashing", size_hint) as advance:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                advance(len(chunk))
    except OSError as exc:
        raise UsageError(f"--payload-file {path}: {exc.strerror}") from None
    return size, digest.hexdigest()


def _stage(env: Env, prepared: Prepared, wait: bool, payload_id: str, *,
           hint: str | None = None) -> dict[str, Any]:
    """Queue one stage of the large-payload path; a REJECTED stage stops the flow (exit 1)."""
    from nereus.errors import NereusError

    data = _submit(env, [prepared], wait)[0]
    if data.get("result") == "REJECTED":
        raise NereusError(
            f"{prepared.kind} of payload {payload_id} was REJECTED on shard {data['shard']} at "
            f"position {data['source_position']}: {data.get('reason')}: {data.get('detail')}",
            hint=hint,
        )
    return data


def _schedule_large(
    env: Env, path: Path, *, lane: str, deliver_at_ms: int, expire_at_ms: int | None,
    key: str | None, headers: dict[str, str], message_id: str | None, route: str, wait: bool,
) -> None:
    """RESERVE -> upload -> attest -> COMMIT -> SCHEDULE(payload_ref), all on one shard."""
    from nereus.client import prepare_payload_commit, prepare_payload_reserve, prepare_schedule
    from nereus.engine.objectstore.factory import open_object_store
    from nereus.errors import NereusError, UsageError
    from nereus.machine.validate import check_headers, check_lane, check_times

    config = env.config
    _check_message(env, lane=lane, deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms)
    # what the SCHEDULE's handler would reject, checked before anything is reserved or uploaded
    failure = (check_lane(lane)
               or check_times(deliver_at_ms, deliver_at_ms, expire_at_ms)
               or check_headers(headers, config.limits))
    if failure is not None:
        raise UsageError(failure.detail or "the message would be REJECTED")
    limit = config.limits.max_payload_bytes

    def too_large(size: int) -> UsageError:
        return UsageError(
            f"the payload is {size} bytes, over the large-payload limit of {limit} "
            f"(shard.max_payload_bytes in {config.source})")

    try:
        size_hint = path.stat().st_size
    except OSError as exc:
        raise UsageError(f"--payload-file {path}: {exc.strerror}") from None
    if size_hint > limit:
        raise too_large(size_hint)
    route_ref = _route(env, route)
    delay_message_id = _check_id(message_id or str(uuid.uuid4()), "id")
    objects = open_object_store(config.objects, env.home)
    size, sha256 = _hash_file(env, path, size_hint)
    if size > limit:
        raise too_large(size)
    shard = route_ref.placement(delay_message_id, lane, key)
    payload_id = uuid.uuid4().hex
    object_key = f"payloads/{shard.route}/{shard.partition}/{payload_id}"
    reserve = prepare_payload_reserve(
        route_ref, command_id=str(uuid.uuid4()), delay_message_id=delay_message_id,
        payload_id=payload_id, size_bytes=size, sha256=sha256,
        expires_at_ms=_now_ms() + RESERVATION_TTL_MS, shard=shard)
    stages = [_stage(env, reserve, wait, payload_id)]
    leftover = (f"the object {object_key} (if uploaded) is collected by `nereus payload gc` "
                "once the reservation expires")
    with env.output.progress(f"uploading {object_key}", size) as advance:
        uploaded = objects.put_file(object_key, path)
        advance(uploaded.size)
    attested = objects.head(object_key)
    if attested is None or (attested.size, attested.sha256) != (size, sha256):
        found = ("no object" if attested is None else
                 f"{attested.size} bytes, sha256 {attested.sha256 or 'unknown'}")
        raise NereusError(
            f"attestation of {object_key} in {objects.description} failed: reserved {size} bytes "
            f"sha256 {sha256}, the store holds {found}; PAYLOAD_COMMIT was not queued",
            hint=f"did {path} change during the upload? {leftover}",
        )
    commit = prepare_payload_commit(
        route_ref, command_id=str(uuid.uuid4()), delay_message_id=delay_message_id,
        payload_id=payload_id, size_bytes=size, sha256=sha256, object_key=object_key,
        shard=shard)
    stages.append(_stage(env, commit, wait, payload_id, hint=leftover))
    prepared = prepare_schedule(
        route_ref, command_id=str(uuid.uuid4()), delay_message_id=delay_message_id, lane=lane,
        deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms, key=key, headers=headers,
        payload=b"", payload_ref=payload_id,
    )
    _queue_and_report(env, prepared, wait, extra={
        "payload_id": payload_id, "payload_bytes": size, "payload_sha256": sha256,
        "payload_object": object_key, "payload_stages": stages,
    })


def _schedule_batch(env: Env, path: Path, route: str, wait: bool) -> None:
    from nereus.errors import UsageError

    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise UsageError(f"--batch {path}: {exc.strerror}") from None
    prepared = [_batch_line(env, number, line, route)
                for number, line in enumerate(lines, start=1) if line.strip()]
    if not prepared:
        raise UsageError(f"--batch {path}: no messages in the file")
    receipts = _submit(env, prepared, wait)
    rejected = sum(1 for r in receipts if r.get("result") == "REJECTED")
    data = {"queued": len(receipts), "rejected": rejected, "receipts": receipts}
    env.output.emit(data, lambda out: out.print(
        f"queued {len(receipts)} message(s) from {path}"
        + (f"; {rejected} REJECTED" if rejected else "")))
    if rejected:
        raise typer.Exit(1)


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
    delay_message_id = _check_id(message_id, "ID")
    prepared = prepare_cancel(
        _route(env, route), command_id=str(uuid.uuid4()), delay_message_id=delay_message_id,
        shard=env.message_shard(route, delay_message_id),
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
    delay_message_id = _check_id(message_id, "ID")
    prepared = prepare_reschedule(
        _route(env, route), command_id=str(uuid.uuid4()),
        delay_message_id=delay_message_id, deliver_at_ms=deliver_at_ms,
        expire_at_ms=None if expire_at is None else parse_time_ms(expire_at, field="--expire-at"),
        shard=env.message_shard(route, delay_message_id),
    )
    _queue_and_report(env, prepared, wait)


@app.command("show")
def show(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The delayMessageId.")],
    barrier: Annotated[bool, typer.Option(
        "--barrier", help="Append a query barrier first, so the answer is conclusive.")] = False,
    route: RouteOption = "default",
) -> None:
    """Queued vs applied vs message state, attempts and their evidence (needs the engine)."""
    env: Env = ctx.obj
    data = env.admin().message(message_id, route=route, barrier=barrier)

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


@app.command("list")
def list_messages(
    ctx: typer.Context,
    shard: Annotated[str | None, typer.Option("--shard", help="Only this shard.")] = None,
    state: Annotated[str | None, typer.Option(
        "--state", help="Only this state (SCHEDULED, PUBLISHED, UNCERTAIN, ...).")] = None,
    lane: Annotated[str | None, typer.Option("--lane", help="Only this lane.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 100,
) -> None:
    """List messages (needs the engine)."""
    env: Env = ctx.obj
    data = env.admin().get("/v1/messages", shard=shard, state=state.upper() if state else None,
                           lane=lane, limit=limit)

    def human(out: Console) -> None:
        from rich.table import Table

        table = Table("id", "shard", "lane", "state", "deliver at", "gen")
        for m in data["messages"]:
            table.add_row(m["delay_message_id"], m["shard"], m["lane"], m["state"],
                          m["deliver_at"], str(m["generation"]))
        out.print(table)

    env.output.emit(data, human)
