"""Submitting commands through the home's ``CommandSink`` and reporting their receipts:
batches in chunks of any size, ``--wait`` that exits 6 when it cannot tell, and a batch
that stops part-way saying which lines were acknowledged and writing a retry file that is
safe to run (``docs/safety.md`` §6).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nereus.cli import message_input
from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.client import CommandSink, Prepared, Receipt
    from nereus.errors import NereusError

# one admin request or one log append carries at most this much (the admin socket takes
# 64 MiB of JSON; base64 adds a third): a batch of any size goes in chunks
CHUNK_RECORDS = 5_000
CHUNK_BYTES = 16 << 20


class Interrupted(Exception):
    """A submission stopped part-way: ``receipts`` were acknowledged, the rest not."""

    def __init__(self, receipts: list[Receipt], cause: NereusError) -> None:
        super().__init__(cause.message)
        self.receipts = receipts
        self.cause = cause


def chunks(prepared: list[Prepared]) -> Iterator[list[Prepared]]:
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


def submit(env: Env, prepared: list[Prepared], wait: bool,
           advance: Callable[[int], None] | None = None) -> list[Receipt]:
    """Submit through the home's ``CommandSink`` (the engine when it runs, else the logs),
    in chunks; a failure part-way raises ``Interrupted`` with what was acknowledged.
    ``advance`` is told of each chunk acknowledged (a progress bar)."""
    from nereus.errors import NereusError, ServiceUnreachable

    sink = env.command_sink(wait=wait)
    out: list[Receipt] = []
    for chunk in chunks(prepared):
        try:
            out += submit_chunk(sink, chunk, wait)
        except NereusError as exc:
            raise Interrupted(out, exc) from None
        except OSError as exc:
            raise Interrupted(out, ServiceUnreachable(
                f"appending to the Shard Log failed: {exc}")) from None
        if advance is not None:
            advance(len(chunk))
    return out


def submit_chunk(sink: CommandSink, chunk: list[Prepared], wait: bool) -> list[Receipt]:
    return sink.submit(chunk, wait=wait)


def exit_if_not_known(env: Env, receipts: Sequence[Receipt], wait: bool) -> None:
    """Under --wait, a receipt still QUEUED means the result is not known yet: exit 6."""
    from nereus.adapters.admin.admin_client import WAIT_MS

    if not wait:
        return
    queued = [r for r in receipts if r.evidence == "QUEUED"]
    if not queued:
        return
    first = queued[0]
    env.output.err.print(
        f"queued; result not known yet: {len(queued)} command(s) durable in the Shard Log "
        f"but not applied within {WAIT_MS // 1000} s (is shard {first.shard} failed? see "
        f"`nereus engine status`); ask later with `nereus command show "
        f"{first.command_id}`", markup=False, highlight=False)
    raise Answered(ExitCode.RESULT_NOT_KNOWN)


def submit_one(env: Env, prepared: Prepared, wait: bool) -> Receipt:
    try:
        return submit(env, [prepared], wait)[0]
    except Interrupted as stopped:
        raise stopped.cause from None


def queue_and_report(env: Env, prepared: Prepared, wait: bool) -> None:
    report(env, submit_one(env, prepared, wait), wait)


def report(env: Env, receipt: Receipt, wait: bool) -> None:
    """Print one command's receipt (a ``LargePayloadReceipt`` names its payload too);
    exit 1 when REJECTED, 6 when --wait could not tell."""
    import msgspec

    from nereus.adapters.offline.large_payload import LargePayloadReceipt
    from nereus.cli.output import shown

    def human(out: Console) -> None:
        r = shown(receipt)
        if r.evidence == "APPLIED":
            why = f" ({r.reason}: {r.detail})" if r.reason else ""
            out.print(f"{r.kind} {r.delay_message_id} {r.result} on shard {r.shard} at "
                      f"position {r.source_position}{why}")
        else:
            out.print(
                f"{r.kind} {r.delay_message_id} queued on shard {r.shard} at position "
                f"{r.source_position}  [dim](QUEUED: durable in the Shard Log, not yet "
                f"applied)[/dim]"
            )
        out.print(f"  command id {r.command_id}")
        if isinstance(r, LargePayloadReceipt):
            out.print(f"  payload {r.payload_id}: {r.payload_bytes} bytes, sha256 "
                      f"{r.payload_sha256[:16]}.., object {r.payload_object}")

    env.output.emit(msgspec.to_builtins(receipt), human)
    if receipt.result == "REJECTED":
        raise Answered(ExitCode.NO)
    exit_if_not_known(env, [receipt], wait)


def schedule_batch(env: Env, path: Path, route: str, wait: bool) -> None:
    import msgspec

    from nereus.cli.batch_receipts import ScheduledBatch, numbered

    numbers, prepared = message_input.read_batch(env, path, route)
    try:
        name = "standard input" if message_input.is_stdin(path) else path.name
        with env.output.progress(f"queueing {name}", len(prepared)) as advance:
            receipts = submit(env, prepared, wait, advance)
    except Interrupted as stopped:
        raise interrupted_error(env, path, numbers, prepared, stopped) from None
    rejected = sum(1 for r in receipts if r.result == "REJECTED")
    batch = ScheduledBatch(queued=len(receipts), rejected=rejected,
                           receipts=numbered(numbers, receipts))
    env.output.emit(msgspec.to_builtins(batch), lambda out: out.print(
        f"queued {len(receipts)} message(s) from "
        f"{escape_path(message_input.batch_label(path))}"
        + (f"; {rejected} REJECTED" if rejected else "")))
    if rejected:
        raise Answered(ExitCode.NO)
    exit_if_not_known(env, receipts, wait)


def escape_path(path: Path | str) -> str:
    from nereus.cli.output import safe_markup

    return safe_markup(str(path))


def interrupted_error(env: Env, path: Path, numbers: list[int], prepared: list[Prepared],
                 stopped: Interrupted) -> NereusError:
    """The error for a batch that stopped part-way: which lines the log acknowledged, and
    a retry file with the others, each with its id and absolute times fixed, so running it
    queues the same commands (a line the log took without our hearing of it is applied
    once: its command id is derived from its content)."""
    import msgspec

    from nereus.cli.batch_receipts import numbered
    from nereus.errors import NereusError

    acknowledged = stopped.receipts
    rest = prepared[len(acknowledged):]
    written: Path | None = None
    problems: list[str] = []
    for folder in retry_folders(env, path):
        try:
            written = write_retry_file(folder, path, rest)
            break
        except OSError as exc:
            problems.append(f"{folder}: {exc.strerror}")
    if written is not None:
        retry_note = (f"a retry is safe: `nereus message schedule --batch {written}` queues the "
                      f"{len(rest)} line(s) not acknowledged with the same ids and times; "
                      "a command the log already holds is applied once")
    else:
        retry_note = (f"no retry file could be written ({'; '.join(problems)}); "
                      "re-run the lines not acknowledged, giving each line an id")
    cause = stopped.cause
    first_missing = numbers[len(acknowledged)] if rest else None
    error = NereusError(
        f"the batch from {message_input.batch_label(path)} stopped after {len(acknowledged)} of "
        f"{len(prepared)} message(s) "
        f"were acknowledged (lines from {first_missing} on were not): {cause.message}",
        hint=retry_note, document={
            "acknowledged": msgspec.to_builtins(numbered(numbers, acknowledged)),
            "acknowledged_count": len(acknowledged),
            "not_acknowledged_lines": numbers[len(acknowledged):],
            "retry_file": None if written is None else str(written)})
    error.exit_code = cause.exit_code
    return error


def retry_folders(env: Env, path: Path) -> list[Path]:
    """Where a batch's retry file goes: next to its file, else in the home's ``batch/``
    folder (private, like the home); a batch from standard input has only the home's."""
    home = env.layout.batch_retries
    return [home] if message_input.is_stdin(path) else [path.absolute().parent, home]


def write_retry_file(folder: Path, path: Path, rest: list[Prepared]) -> Path:
    """A new file in ``folder`` holding ``rest`` as batch lines, named after the batch and
    the time (``stdin`` for standard input)."""
    stem = "stdin" if message_input.is_stdin(path) else path.name
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    retry = folder / f"{stem}.retry-{message_input.now_ms()}.jsonl"
    with open(retry, "x", encoding="utf-8", errors="surrogatepass") as handle:
        for item in rest:
            handle.write(json.dumps(batch_fields(item)) + "\n")
    return retry


def batch_fields(item: Prepared) -> dict[str, str | dict[str, str]]:
    """A batch line that prepares exactly ``item`` again."""
    from nereus.records import Schedule

    record = item.record
    assert isinstance(record, Schedule)
    line: dict[str, str | dict[str, str]] = {"id": record.delay_message_id, "lane": record.lane,
                            "deliver_at": str(record.deliver_at_ms)}
    if record.expire_at_ms is not None:
        line["expire_at"] = str(record.expire_at_ms)
    if record.key is not None:
        line["key"] = record.key
    if record.headers:
        line["headers"] = dict(record.headers)
    line["payload"] = record.payload.decode(errors="surrogatepass")
    return line
