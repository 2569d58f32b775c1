"""The producer SDK's input checks, before any I/O: the rules the shard applies
(``nereus.machine.validate``: ids, lane names, times, headers) and the CLI's edge checks
(Unicode text, a known lane, the payload limits), each refusal an ``InvalidInput`` naming
the argument. Time is passed in (``now_ms``): the core reads no clock.

Times are ``datetime`` with a zone, epoch milliseconds (``int``), or the CLI's text
(ISO-8601 with a zone, or epoch ms); a naive ``datetime`` is refused, as the CLI refuses a
time without a zone. Delays are ``timedelta`` or the CLI's text (``30s``, ``1h30m``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from nereus.client.errors import InvalidInput, UnknownLane
from nereus.errors import UsageError
from nereus.machine.limits import Limits
from nereus.machine.validate import check_headers, check_id, check_lane, check_times
from nereus.timespec import MAX_TIME_MS, parse_duration_ms, parse_time_ms

TimeLike = datetime | int | str
DelayLike = timedelta | str


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleFields:
    """A SCHEDULE's checked fields, before its payload is placed (inline or by reference)."""

    delay_message_id: str
    lane: str
    deliver_at_ms: int
    expire_at_ms: int | None
    key: str | None
    headers: dict[str, str]


def text(value: str, field: str) -> str:
    """``value`` if it is a ``str`` of valid Unicode (no lone surrogate)."""
    if not isinstance(value, str):
        raise InvalidInput(f"expected a str, got {type(value).__name__}", field=field)
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"character {exc.start} is not valid Unicode "
                           f"({value[exc.start]!r})", field=field) from None
    return value


def identifier(value: str, field: str, limits: Limits) -> str:
    """An id the shard accepts (``nereus.machine.validate.check_id``), or InvalidInput."""
    refused = check_id(text(value, field), field, limits)
    if refused is not None:
        raise InvalidInput(refused.detail or "not a valid id", field=field)
    return value


def time_ms(value: TimeLike, field: str) -> int:
    """Epoch ms of a zoned ``datetime``, an ``int`` of epoch ms, or the CLI's time text."""
    if isinstance(value, bool):
        raise InvalidInput("expected a time, got a bool", field=field)
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidInput("a naive datetime has no time zone (give tzinfo, e.g. UTC)",
                               field=field)
        value = int(value.timestamp() * 1000)
    if isinstance(value, int):
        if not 0 <= value <= MAX_TIME_MS:
            raise InvalidInput(f"{value} is outside 0..{MAX_TIME_MS} epoch ms", field=field)
        return value
    try:
        return parse_time_ms(text(value, field), field=field)
    except UsageError as exc:
        raise InvalidInput(exc.message, field=field, hint=exc.hint) from None


def delivery_ms(now_ms: int, deliver_at: TimeLike | None, delay: DelayLike | None) -> int:
    """The delivery time from exactly one of ``deliver_at`` or ``delay`` (from ``now_ms``)."""
    if (deliver_at is None) == (delay is None):
        raise InvalidInput("give exactly one of deliver_at or delay", field="deliver_at")
    if deliver_at is not None:
        return time_ms(deliver_at, "deliver_at")
    assert delay is not None
    if isinstance(delay, timedelta):
        delay_ms = int(delay.total_seconds() * 1000)
    else:
        try:
            delay_ms = parse_duration_ms(text(delay, "delay"), field="delay")
        except UsageError as exc:
            raise InvalidInput(exc.message, field="delay", hint=exc.hint) from None
    if delay_ms < 0:
        raise InvalidInput("a delay cannot be negative", field="delay")
    return time_ms(min(now_ms + delay_ms, MAX_TIME_MS + 1), "delay")


def lane_name(lane: str, lanes: frozenset[str], source: str) -> str:
    """A lane name the shard accepts, configured on the route."""
    refused = check_lane(text(lane, "lane"))
    if refused is not None:
        raise InvalidInput(refused.detail or "not a lane name", field="lane")
    if lane not in lanes:
        raise UnknownLane(f"no lane {lane!r} in {source} (configured: "
                          f"{', '.join(sorted(lanes)) or 'none'})")
    return lane


def message_fields(*, deliver_at_ms: int, expire_at_ms: int | None, key: str | None,
                   headers: Mapping[str, str] | None, limits: Limits) -> dict[str, str]:
    """Times, key and headers as the shard checks them; the headers as a plain dict."""
    refused = check_times(deliver_at_ms, None, expire_at_ms)
    if refused is not None:
        raise InvalidInput(refused.detail or "bad times",
                           field="expire_at" if expire_at_ms is not None and
                           expire_at_ms < deliver_at_ms else "deliver_at")
    if key is not None:
        text(key, "key")
    plain = {text(name, "headers"): text(value, f"headers[{name!r}]")
             for name, value in (headers or {}).items()}
    refused = check_headers(plain, limits)
    if refused is not None:
        raise InvalidInput(refused.detail or "bad headers", field="headers",
                           hint="the limits are [shard] max_headers and max_header_bytes")
    return plain


def payload_size(size: int, limits: Limits) -> bool:
    """Whether a payload of ``size`` bytes rides inline (False: the large-payload path);
    InvalidInput above ``max_payload_bytes``."""
    if size > limits.max_payload_bytes:
        raise InvalidInput(f"{size} bytes, over the large-payload limit of "
                           f"{limits.max_payload_bytes} ([shard] max_payload_bytes)",
                           field="payload")
    return size <= limits.max_inline_payload_bytes
