"""What a message command takes, checked at the edge: times and delays, ids, headers,
payload text, and batch lines (every bad line named before anything is queued).

Each check raises a ``UsageError`` naming the flag or field, the character or limit at
fault and what to do (``docs/safety.md`` §4); the state machine checks the same things
again for records that do not come through the CLI.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from nereus.cli.context import Env

if TYPE_CHECKING:
    from nereus.client import Prepared, RouteRef


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def deliver_time(deliver_at: str | None, delay: str | None, *, what: str,
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

    return add_duration_ms(now_ms(), parse_duration_ms(delay, field=names[1]), text=delay,
                           field=names[1])


def check_id(env: Env, value: str, flag: str) -> str:
    """An id as the shard will accept it (``nereus.machine.validate.check_id``: non-empty,
    printable, nothing invisible or space-like, no space at either end, at most
    ``max_id_bytes``), refused here before anything is queued."""
    from nereus.errors import UsageError
    from nereus.machine.validate import check_id as shard_check_id

    check_unicode(value, flag)
    refused = shard_check_id(value, flag, env.config.limits)
    if refused is not None:
        shown = repr(value[:80]) + ("..." if len(value) > 80 else "")
        raise UsageError(f"{flag} {shown}: {refused.detail}", hint=_id_hint(env, value))
    return value


def _id_hint(env: Env, value: str) -> str:
    """What to do about a refused id: the limit to raise, or the character to remove."""
    import unicodedata

    from nereus.invisible_text import find_invisible
    from nereus.terminal_text import find_control

    if find_control(value) is None:
        invisible = find_invisible(value)
        if invisible is not None:
            char = value[invisible]
            name = unicodedata.name(char, "an unnamed format character")
            looks = ("a plain space" if unicodedata.category(char) in ("Zs", "Zl", "Zp")
                     else "nothing")
            return (f"U+{ord(char):04X} is {name}: it prints as {looks}, so this id would "
                    "print like another one; remove it")
        if value and not value.strip(" "):
            return "an id of only spaces prints as nothing: use letters, digits and punctuation"
        if value[:1] == " " or value[-1:] == " ":
            return ("a space at either end of an id does not show when it is printed, so it "
                    "would look like another id; remove it (a space inside an id is fine)")
        if len(value.encode()) > env.config.limits.max_id_bytes:
            return f"[shard] max_id_bytes in {env.config.source} sets the limit"
    return "ids reach operators' terminals and logs: use letters, digits and punctuation"


def route_ref(env: Env, name: str) -> RouteRef:
    return env.route_ref(name)


def check_message(env: Env, *, lane: str, deliver_at_ms: int,
                   expire_at_ms: int | None) -> None:
    from nereus.errors import NotFound, UsageError

    config = env.config
    if lane not in config.lanes:
        known = ", ".join(sorted(config.lanes)) or "none"
        raise NotFound(f"no lane {lane!r} in {config.source} (configured: {known})")
    if expire_at_ms is not None and expire_at_ms < deliver_at_ms:
        raise UsageError("expire_at is before the delivery time: it could never be published")


def prepare_one(
    env: Env, *, lane: str, deliver_at_ms: int, expire_at_ms: int | None, key: str | None,
    headers: dict[str, str], body: bytes, message_id: str | None, route: str,
    command_id: str | None = None,
) -> Prepared:
    from nereus.client import prepare_schedule
    from nereus.errors import UsageError
    from nereus.machine.validate import check_headers

    config = env.config
    check_message(env, lane=lane, deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms)
    if key is not None:
        check_unicode(key, "key")
    for name, value in headers.items():
        check_unicode(name, "header name")
        check_unicode(value, f"header {name!r}")
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
        route_ref(env, route), command_id=command_id_or_none(env, command_id),
        delay_message_id=message_id_or_new(env, message_id), lane=lane,
        deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms, key=key, headers=headers,
        payload=body,
    )


def check_unicode(value: str, what: str) -> None:
    """Refuse text that is not Unicode (lone surrogates: undecodable bytes on the command
    line, or ``\\ud800`` in JSON): it cannot be stored or published."""
    from nereus.client.validate import text

    text(value, what)  # the SDK's check: an InvalidInput, a UsageError (exit 2)


def message_id_or_new(env: Env, given: str | None) -> str:
    """``--id`` checked (an empty one is refused, not replaced), or a new UUID."""
    return str(uuid.uuid4()) if given is None else check_id(env, given, "id")


def own_command_id(env: Env, given: str | None) -> str:
    """``--command-id`` checked, or a new UUID (a cancel or reschedule: a retry that should
    be one command names its id)."""
    return command_id_or_none(env, given) or str(uuid.uuid4())


def command_id_or_none(env: Env, given: str | None) -> str | None:
    """``--command-id`` checked like an id; None lets the command derive one."""
    return None if given is None else check_id(env, given, "--command-id")


def batch_line(env: Env, number: int, line: str, route: str) -> Prepared:
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
        deliver_at_ms = deliver_time(None if deliver is None else str(deliver),
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
        return prepare_one(
            env, lane=item["lane"], deliver_at_ms=deliver_at_ms,
            expire_at_ms=None if expire is None else parse_time_ms(str(expire),
                                                                   field="field expire_at"),
            key=key, headers=headers, body=payload.encode(errors="surrogatepass"),
            message_id=message_id, route=route,
        )
    except NereusError as exc:
        exc.message = f"{where}: {exc.message}"
        raise


MAX_BAD_LINES = 20  # a batch with bad lines names this many of them, then counts the rest


class BadLine(TypedDict):
    """A refused line of a ``--batch`` file, as the error document's ``bad_lines`` lists it."""

    line: int
    error: str


STDIN = "-"  # ``--batch -``: the lines come from standard input


def is_stdin(path: Path) -> bool:
    """Whether ``--batch`` names standard input (``-``; a file named ``-`` is given by its
    full path)."""
    return str(path) == STDIN


def batch_label(path: Path) -> str:
    """How messages name the batch: its path, or ``standard input``."""
    return "standard input" if is_stdin(path) else str(path)


def _batch_text(env: Env, path: Path) -> str:
    """The batch's text: the file's, or standard input's to its end."""
    import sys

    from nereus.errors import UsageError

    where = "--batch -" if is_stdin(path) else f"--batch {path}"
    try:
        if is_stdin(path):
            if sys.stdin is None:
                raise UsageError("--batch -: there is no standard input to read")
            if sys.stdin.isatty() and not env.output.json_mode:
                env.output.err.print("reading JSON lines from standard input; end them with "
                                     "Ctrl-D", highlight=False)
            return sys.stdin.buffer.read().decode("utf-8", errors="strict")
        with open(path, encoding="utf-8", errors="strict") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: not UTF-8 at byte {exc.start}") from None


def read_batch(env: Env, path: Path, route: str) -> tuple[list[int], list[Prepared]]:
    """Every line of the file (or of standard input, ``-``) prepared, or a usage error
    naming every bad line (up to ``MAX_BAD_LINES``): nothing is queued from a batch with a
    bad line."""
    from nereus.errors import NereusError, UsageError

    lines = _batch_text(env, path).splitlines()
    label = batch_label(path)
    name = "standard input" if is_stdin(path) else path.name
    numbers: list[int] = []
    prepared: list[Prepared] = []
    bad: list[BadLine] = []
    bad_count = 0
    with env.output.progress(f"checking {name}", len(lines)) as advance:
        for number, line in enumerate(lines, start=1):
            if number % 1_000 == 0:
                advance(1_000)
            if not line.strip():
                continue
            try:
                prepared.append(batch_line(env, number, line, route))
                numbers.append(number)
            except NereusError as exc:
                bad_count += 1
                if len(bad) < MAX_BAD_LINES:
                    bad.append(BadLine(line=number, error=exc.message))
    if bad:
        more = f" (and {bad_count - len(bad)} more)" if bad_count > len(bad) else ""
        listed = "; ".join(item["error"] for item in bad[:5]) + (" ..." if len(bad) > 5 else "")
        raise UsageError(
            listed if bad_count == 1 else
            f"{listed}{more}: {bad_count} bad lines in {label}, nothing was queued",
            hint="fix the lines listed (JSON: bad_lines) and run it again; nothing of the batch "
            "was queued", document={"bad_lines": bad, "bad_line_count": bad_count})
    if not prepared:
        raise UsageError(f"--batch {STDIN if is_stdin(path) else path}: no messages in "
                         f"{label}")
    return numbers, prepared
