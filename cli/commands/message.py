"""``nereus message``: schedule, cancel and reschedule Delayed Messages.

These prepare the command (ids and bytes fixed first) and submit it through the home's
``CommandSink``: the running engine, or straight to the shard's Shard Log. The printed
receipt is QUEUED evidence (the Shard Log durably holds the command; the shard has not
necessarily applied it yet), or APPLIED with the result under ``--wait``.

A ``--payload-file`` above ``[shard] max_inline_payload_bytes`` takes the large-payload
path (``nereus.adapters.large_payload``: reserve, upload, attest, commit, schedule).
"""

from __future__ import annotations

import json
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

    from nereus.client import CommandSink, Prepared, Receipt, RouteRef
    from nereus.errors import NereusError

app = typer.Typer(help="Schedule, cancel and reschedule delayed messages.", no_args_is_help=True)

WaitOption = Annotated[bool, typer.Option(
    "--wait", help="Wait for the applied result (needs the engine running).")]
RouteOption = Annotated[str, typer.Option("--route", help="Ingress route.")]
CommandIdOption = Annotated[str | None, typer.Option(
    "--command-id", help="The command's id: a retry with the same id and the same content "
    "returns the first result (exit 0) instead of acting twice; different content under it "
    "is REJECTED DUPLICATE_CONFLICT.")]



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
    from nereus.timespec import add_duration_ms

    return add_duration_ms(_now_ms(), parse_duration_ms(delay, field=names[1]), text=delay,
                           field=names[1])


def _check_id(env: Env, value: str, flag: str) -> str:
    """An id as the shard will accept it: 1..max_id_bytes of UTF-8, no control characters."""
    from nereus.errors import UsageError
    from nereus.terminal_text import find_control

    limit = env.config.limits.max_id_bytes
    shown = repr(value[:80]) + ("..." if len(value) > 80 else "")
    if not value:
        raise UsageError(f"{flag}: an id must not be empty")
    _utf8(value, flag)
    control = find_control(value)
    if control is not None:
        raise UsageError(f"{flag} {shown}: character {control} is a control character "
                         f"(U+{ord(value[control]):04X}); ids are printable text",
                         hint="ids reach operators' terminals and logs: use letters, digits "
                         "and punctuation")
    if len(value.encode()) > limit:
        raise UsageError(f"{flag} {shown}: {len(value.encode())} bytes, over the limit of "
                         f"{limit} (shard.max_id_bytes)")
    return value


def _route(env: Env, name: str) -> RouteRef:
    return env.route_ref(name)


# one admin request or one log append carries at most this much (the admin socket takes
# 64 MiB of JSON; base64 adds a third): a batch of any size goes in chunks
CHUNK_RECORDS = 5_000
CHUNK_BYTES = 16 << 20


class Interrupted(Exception):
    """A submission stopped part-way: ``receipts`` were acknowledged, the rest not."""

    def __init__(self, receipts: list[dict[str, Any]], cause: NereusError) -> None:
        super().__init__(cause.message)
        self.receipts = receipts
        self.cause = cause


def _chunks(prepared: list[Prepared]) -> Iterator[list[Prepared]]:
    chunk: list[Prepared] = []
    size = 0
    for item in prepared:
        if chunk and (len(chunk) >= CHUNK_RECORDS or size + len(item.data) > CHUNK_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += len(item.data)
    if chunk:
        yield chunk


def _submit(env: Env, prepared: list[Prepared], wait: bool) -> list[dict[str, Any]]:
    """Submit through the home's ``CommandSink`` (the engine when it runs, else the logs),
    in chunks; a failure part-way raises ``Interrupted`` with what was acknowledged."""
    from nereus.errors import NereusError, ServiceUnreachable

    sink = env.command_sink(wait=wait)
    out: list[dict[str, Any]] = []
    for chunk in _chunks(prepared):
        try:
            out += [receipt.document() for receipt in _submit_chunk(sink, chunk, wait)]
        except NereusError as exc:
            raise Interrupted(out, exc) from None
        except OSError as exc:
            raise Interrupted(out, ServiceUnreachable(
                f"appending to the Shard Log failed: {exc}")) from None
    return out


def _submit_chunk(sink: CommandSink, chunk: list[Prepared], wait: bool) -> list[Receipt]:
    return sink.submit(chunk, wait=wait)


def _not_known(env: Env, data: list[dict[str, Any]], wait: bool) -> None:
    """Under --wait, a receipt still QUEUED means the result is not known yet: exit 6."""
    from nereus.adapters.admin_client import WAIT_MS
    from nereus.errors import ExitCode

    if not wait:
        return
    queued = [r for r in data if r.get("evidence") == "QUEUED"]
    if not queued:
        return
    first = queued[0]
    env.output.err.print(
        f"queued; result not known yet: {len(queued)} command(s) durable in the Shard Log "
        f"but not applied within {WAIT_MS // 1000} s (is shard {first['shard']} failed? see "
        f"`nereus engine status`); ask later with `nereus command show "
        f"{first['command_id']}`", markup=False, highlight=False)
    raise typer.Exit(int(ExitCode.RESULT_NOT_KNOWN))


def _submit_one(env: Env, prepared: Prepared, wait: bool) -> dict[str, Any]:
    try:
        return _submit(env, [prepared], wait)[0]
    except Interrupted as stopped:
        raise stopped.cause from None


def _queue_and_report(env: Env, prepared: Prepared, wait: bool) -> None:
    _report(env, _submit_one(env, prepared, wait), wait)


def _report(env: Env, data: dict[str, Any], wait: bool,
            extra: dict[str, Any] | None = None) -> None:
    """Print one command's receipt; exit 1 when REJECTED, 6 when --wait could not tell."""
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
    _not_known(env, [data], wait)


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
    command_id: str | None = None,
) -> Prepared:
    from nereus.client import prepare_schedule
    from nereus.errors import UsageError
    from nereus.machine.validate import check_headers

    config = env.config
    _check_message(env, lane=lane, deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms)
    if key is not None:
        _utf8(key, "key")
    for name, value in headers.items():
        _utf8(name, "header name")
        _utf8(value, f"header {name!r}")
    bad_headers = check_headers(headers, config.limits)
    if bad_headers is not None:
        raise UsageError(f"headers: {bad_headers.detail}",
                         hint=f"the limits are [shard] max_headers and max_header_bytes in "
                         f"{config.source}")
    limit = config.limits.max_inline_payload_bytes
    if len(body) > limit:
        raise UsageError(
            f"the payload is {len(body)} bytes, over the inline limit of {limit} "
            f"(shard.max_inline_payload_bytes in {config.source})",
            hint="schedule it on its own with --payload-file FILE: above the inline limit that "
            "takes the object-store (large-payload) path",
        )
    return prepare_schedule(
        _route(env, route), command_id=_command_id(env, command_id),
        delay_message_id=_message_id(env, message_id), lane=lane,
        deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms, key=key, headers=headers,
        payload=body,
    )


def _utf8(value: str, what: str) -> None:
    """Refuse text that is not Unicode (lone surrogates: undecodable bytes on the command
    line, or ``\\ud800`` in JSON): it cannot be stored or published."""
    from nereus.errors import UsageError

    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise UsageError(f"{what}: character {exc.start} is not valid Unicode "
                         f"({value[exc.start]!r})") from None


def _message_id(env: Env, given: str | None) -> str:
    """``--id`` checked (an empty one is refused, not replaced), or a new UUID."""
    return str(uuid.uuid4()) if given is None else _check_id(env, given, "id")


def _command_id(env: Env, given: str | None) -> str | None:
    """``--command-id`` checked like an id; None lets the command derive one."""
    return None if given is None else _check_id(env, given, "--command-id")


def _batch_line(env: Env, number: int, line: str, route: str) -> Prepared:
    from nereus.errors import NereusError, UsageError
    from nereus.timespec import parse_time_ms

    where = f"line {number}"
    try:
        item = json.loads(line)
    except (ValueError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
        raise UsageError(f"{where}: not JSON ({why})") from None
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
        message_id = item.get("id")
        if message_id is not None and not isinstance(message_id, str):
            raise UsageError("field id: expected a string")
        return _prepare_one(
            env, lane=item["lane"], deliver_at_ms=deliver_at_ms,
            expire_at_ms=None if expire is None else parse_time_ms(str(expire),
                                                                   field="field expire_at"),
            key=key, headers=headers, body=payload.encode(errors="surrogatepass"),
            message_id=message_id, route=route,
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
    command_id: Annotated[str | None, typer.Option(
        "--command-id", help="The command's id (default: derived from the content, so an "
        "identical retry is the same command).")] = None,
) -> None:
    """Schedule a message for publication not before a time.

    Retries are safe: an identical schedule (same --id, lane, time, expiry, key, headers
    and payload) is the same command, applied once; a retry returns the first result with
    exit 0. A different schedule for an existing --id is REJECTED MESSAGE_EXISTS.
    A command id is remembered for ever today; give --deliver-at, not --delay, to retry
    (a delay is counted from each run's now)."""
    from nereus.errors import UsageError
    from nereus.timespec import parse_time_ms

    env: Env = ctx.obj
    if batch is not None:
        if any(v is not None for v in (lane, deliver_at, delay, payload, payload_file,
                                       message_id, key, expire_at)) or header:
            raise UsageError("--batch takes every field from the file; give no other message flags")
        if command_id is not None:
            raise UsageError("--command-id names one command; a batch derives one per line")
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
        _utf8(payload or "", "--payload")
        body = (payload or "").encode()
    prepared = _prepare_one(env, lane=lane, deliver_at_ms=deliver_at_ms,
                            expire_at_ms=expire_at_ms, key=key, headers=headers, body=body,
                            message_id=message_id, route=route, command_id=command_id)
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


def _schedule_large(
    env: Env, path: Path, *, lane: str, deliver_at_ms: int, expire_at_ms: int | None,
    key: str | None, headers: dict[str, str], message_id: str | None, route: str, wait: bool,
) -> None:
    """The large-payload path (``nereus.adapters.large_payload``), checked first for what
    the SCHEDULE's handler would reject, so nothing is reserved or uploaded in vain."""
    from nereus.adapters.large_payload import LargeMessage, schedule_large_payload
    from nereus.adapters.objectstore.factory import open_object_store
    from nereus.errors import UsageError
    from nereus.machine.validate import check_headers, check_lane, check_times

    config = env.config
    _check_message(env, lane=lane, deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms)
    failure = (check_lane(lane)
               or check_times(deliver_at_ms, deliver_at_ms, expire_at_ms)
               or check_headers(headers, config.limits))
    if failure is not None:
        raise UsageError(failure.detail or "the message would be REJECTED")
    done = schedule_large_payload(
        env.command_sink(wait=wait), open_object_store(config.objects, env.home),
        _route(env, route),
        LargeMessage(delay_message_id=_message_id(env, message_id), lane=lane,
                     deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms, key=key,
                     headers=headers, path=path),
        max_payload_bytes=config.limits.max_payload_bytes, now_ms=_now_ms(),
        new_id=lambda: str(uuid.uuid4()), wait=wait, progress=env.output.progress)
    _report(env, done.schedule.document(), wait, extra={
        "payload_id": done.payload_id, "payload_bytes": done.size,
        "payload_sha256": done.sha256, "payload_object": done.object_key,
        "payload_stages": [stage.document() for stage in done.stages],
    })


MAX_BAD_LINES = 20  # a batch with bad lines names this many of them, then counts the rest


def _read_batch(env: Env, path: Path, route: str) -> tuple[list[int], list[Prepared]]:
    """Every line of the file prepared, or a usage error naming every bad line (up to
    ``MAX_BAD_LINES``): nothing is queued from a file with a bad line."""
    from nereus.errors import NereusError, UsageError

    try:
        with open(path, encoding="utf-8", errors="strict") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise UsageError(f"--batch {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--batch {path}: not UTF-8 at byte {exc.start}") from None
    numbers: list[int] = []
    prepared: list[Prepared] = []
    bad: list[dict[str, Any]] = []
    bad_count = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            prepared.append(_batch_line(env, number, line, route))
            numbers.append(number)
        except NereusError as exc:
            bad_count += 1
            if len(bad) < MAX_BAD_LINES:
                bad.append({"line": number, "error": exc.message})
    if bad:
        more = f" (and {bad_count - len(bad)} more)" if bad_count > len(bad) else ""
        listed = "; ".join(item["error"] for item in bad[:5]) + (" ..." if len(bad) > 5 else "")
        raise UsageError(
            listed if bad_count == 1 else
            f"{listed}{more}: {bad_count} bad lines in {path}, nothing was queued",
            hint="fix the lines listed (JSON: bad_lines) and run it again; nothing of the file "
            "was queued", document={"bad_lines": bad, "bad_line_count": bad_count})
    if not prepared:
        raise UsageError(f"--batch {path}: no messages in the file")
    return numbers, prepared


def _schedule_batch(env: Env, path: Path, route: str, wait: bool) -> None:
    numbers, prepared = _read_batch(env, path, route)
    try:
        receipts = _submit(env, prepared, wait)
    except Interrupted as stopped:
        raise _interrupted(env, path, numbers, prepared, stopped) from None
    for number, receipt in zip(numbers, receipts, strict=True):
        receipt["line"] = number
    rejected = sum(1 for r in receipts if r.get("result") == "REJECTED")
    data = {"queued": len(receipts), "rejected": rejected, "receipts": receipts}
    env.output.emit(data, lambda out: out.print(
        f"queued {len(receipts)} message(s) from {escape_path(path)}"
        + (f"; {rejected} REJECTED" if rejected else "")))
    if rejected:
        raise typer.Exit(1)
    _not_known(env, receipts, wait)


def escape_path(path: Path) -> str:
    from nereus.cli.output import safe_markup

    return safe_markup(str(path))


def _interrupted(env: Env, path: Path, numbers: list[int], prepared: list[Prepared],
                 stopped: Interrupted) -> NereusError:
    """The error for a batch that stopped part-way: which lines the log acknowledged, and
    a retry file with the others, each with its id and absolute times fixed, so running it
    queues the same commands (a line the log took without our hearing of it is applied
    once: its command id is derived from its content)."""
    from nereus.errors import NereusError

    acknowledged = stopped.receipts
    for number, receipt in zip(numbers, acknowledged, strict=False):
        receipt["line"] = number
    rest = prepared[len(acknowledged):]
    retry = path.with_name(f"{path.name}.retry-{_now_ms()}.jsonl")
    written: Path | None = None
    try:
        with open(retry, "x", encoding="utf-8", errors="surrogatepass") as handle:
            for item in rest:
                handle.write(json.dumps(_batch_fields(item)) + "\n")
        retry_note = (f"a retry is safe: `nereus message schedule --batch {retry}` queues the "
                      f"{len(rest)} line(s) not acknowledged with the same ids and times; "
                      "a command the log already holds is applied once")
        written = retry
    except OSError as exc:
        retry_note = (f"no retry file could be written next to {path} ({exc.strerror}); "
                      "re-run the lines not acknowledged, giving each line an id")
    cause = stopped.cause
    first_missing = numbers[len(acknowledged)] if rest else None
    error = NereusError(
        f"the batch {path} stopped after {len(acknowledged)} of {len(prepared)} message(s) "
        f"were acknowledged (lines from {first_missing} on were not): {cause.message}",
        hint=retry_note, document={
            "acknowledged": acknowledged, "acknowledged_count": len(acknowledged),
            "not_acknowledged_lines": numbers[len(acknowledged):],
            "retry_file": None if written is None else str(written)})
    error.exit_code = cause.exit_code
    return error


def _batch_fields(item: Prepared) -> dict[str, Any]:
    """A batch line that prepares exactly ``item`` again."""
    from nereus.records import Schedule

    record = item.record
    assert isinstance(record, Schedule)
    line: dict[str, Any] = {"id": record.delay_message_id, "lane": record.lane,
                            "deliver_at": str(record.deliver_at_ms)}
    if record.expire_at_ms is not None:
        line["expire_at"] = str(record.expire_at_ms)
    if record.key is not None:
        line["key"] = record.key
    if record.headers:
        line["headers"] = dict(record.headers)
    line["payload"] = record.payload.decode(errors="surrogatepass")
    return line


@app.command("cancel")
def cancel(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The delayMessageId.")],
    route: RouteOption = "default",
    wait: WaitOption = False,
    command_id: CommandIdOption = None,
) -> None:
    """Cancel a message; wins only before its Publish Admission.

    To retry safely give --command-id: the same id is one command, applied once."""
    from nereus.client import prepare_cancel

    env: Env = ctx.obj
    delay_message_id = _check_id(env, message_id, "ID")
    prepared = prepare_cancel(
        _route(env, route), command_id=_command_id(env, command_id) or str(uuid.uuid4()),
        delay_message_id=delay_message_id, shard=env.message_shard(route, delay_message_id),
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
    command_id: CommandIdOption = None,
) -> None:
    """Move a message to a new time (a new generation); only before admission.

    To retry safely give --command-id: the same id is one command, applied once."""
    from nereus.client import prepare_reschedule
    from nereus.timespec import parse_time_ms

    env: Env = ctx.obj
    deliver_at_ms = _when(deliver_at, delay, what="reschedule")
    delay_message_id = _check_id(env, message_id, "ID")
    prepared = prepare_reschedule(
        _route(env, route), command_id=_command_id(env, command_id) or str(uuid.uuid4()),
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
