"""A ``--payload-file`` from the command line: read inline at or below the inline limit,
else the large-payload path (``nereus.adapters.offline.large_payload``: reserve, upload,
attest, commit, schedule), checked first so nothing is reserved or uploaded in vain."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from nereus.cli import message_input, submission
from nereus.cli.context import Env

if TYPE_CHECKING:
    from collections.abc import Iterator


@contextmanager
def payload_source(env: Env, path: Path) -> Iterator[tuple[bytes, Path | None]]:
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


def schedule_large(
    env: Env, path: Path, *, lane: str, deliver_at_ms: int, expire_at_ms: int | None,
    key: str | None, headers: dict[str, str], message_id: str | None, route: str, wait: bool,
) -> None:
    """The large-payload path (``nereus.adapters.offline.large_payload``), checked first for what
    the SCHEDULE's handler would reject, so nothing is reserved or uploaded in vain."""
    from nereus.adapters.offline.large_payload import LargeMessage, schedule_large_payload
    from nereus.errors import UsageError
    from nereus.machine.validate import check_headers, check_lane, check_times

    config = env.config
    message_input.check_message(env, lane=lane, deliver_at_ms=deliver_at_ms,
                                expire_at_ms=expire_at_ms)
    failure = (check_lane(lane)
               or check_times(deliver_at_ms, deliver_at_ms, expire_at_ms)
               or check_headers(headers, config.limits))
    if failure is not None:
        raise UsageError(failure.detail or "the message would be REJECTED")
    done = schedule_large_payload(
        env.command_sink(wait=wait), env.object_store(),
        message_input.route_ref(env, route),
        LargeMessage(delay_message_id=message_input.message_id_or_new(env, message_id), lane=lane,
                     deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms, key=key,
                     headers=headers, path=path),
        max_payload_bytes=config.limits.max_payload_bytes, now_ms=message_input.now_ms(),
        new_id=lambda: str(uuid.uuid4()), wait=wait, progress=env.output.progress)
    submission.report(env, done.receipt(), wait)
