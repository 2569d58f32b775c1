"""Parsing of the times and durations operators type.

Times are ISO-8601 with an explicit zone (``2026-11-29T20:00:00Z``,
``2026-11-29T21:00:00+01:00``) or epoch milliseconds (``1795982400000``). A naive time
is refused: a scheduler that guesses the zone publishes at the wrong hour. Durations are
a number and a unit: ``500ms``, ``30s``, ``5m``, ``2h``, ``1d`` (and combinations such as
``1h30m``). Everything is milliseconds since the Unix epoch, UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from nereus.errors import UsageError

MAX_TIME_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the last instant ISO-8601 (and every tool that prints it) can
write. Times beyond it are refused on input; stored ones are printed, never a crash."""

_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d)")
_MAX_DURATION_TEXT = 64
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


_RANGE = "1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z"
_FORMAT_HINT = (f"give ISO-8601 with a zone (2026-11-29T20:00:00Z) or epoch milliseconds, "
                f"from {_RANGE}")
# an ISO-8601 date whose year has more than four digits, or a sign: outside 0001..9999
_LONG_YEAR = re.compile(r"^[+-]?\d{5,}-\d{2}-\d{2}|^[+-]\d{4}-\d{2}-\d{2}")
# a number that is not a plain count of milliseconds: a sign, a fraction or an exponent
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def parse_time_ms(text: str, *, field: str = "time") -> int:
    """Parse an ISO-8601 time with zone, or epoch milliseconds, into epoch ms. A time
    outside what Nereus Delay keeps (before 1970, after 9999, a negative or huge epoch) is
    refused with the range, however it is written."""
    value = text.strip()
    if value.isascii() and value.isdigit():
        return _in_range(int(value) if len(value) <= 20 else MAX_TIME_MS + 1, text, field)
    if _NUMBER.match(value):
        return _epoch_number(value, text, field)
    if _LONG_YEAR.match(value):
        raise _outside(text, field)
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
    except (ValueError, OverflowError):
        raise UsageError(f"{field}: {text!r} is not a time", hint=_FORMAT_HINT) from None
    if parsed.tzinfo is None:
        raise UsageError(
            f"{field}: {text!r} has no time zone",
            hint="add a zone such as Z or +01:00; naive times are ambiguous",
        )
    try:
        return _in_range(int(parsed.timestamp() * 1000), text, field)
    except (OverflowError, ValueError):
        raise _outside(text, field) from None


def _epoch_number(value: str, text: str, field: str) -> int:
    """A number written with a sign, a fraction or an exponent (``-5``, ``1e30``,
    ``1795982400000.5``): outside the range it is refused with the range; inside, it is
    refused because epoch milliseconds are a whole number written in digits."""
    try:
        number = float(value)
    except (ValueError, OverflowError):
        number = float("inf")
    if not 0 <= number <= MAX_TIME_MS:
        raise _outside(text, field)
    raise UsageError(f"{field}: {text!r} is not a time: epoch milliseconds are a whole "
                     "number written in digits (no sign, fraction or exponent)",
                     hint=_FORMAT_HINT)


def _outside(text: str, field: str) -> UsageError:
    return UsageError(f"{field}: {text!r} is outside the times Nereus Delay can keep "
                      f"({_RANGE})", hint="give a time in that range: ISO-8601 with a zone "
                      "or epoch milliseconds")


def _in_range(ms: int, text: str, field: str) -> int:
    if not 0 <= ms <= MAX_TIME_MS:
        raise _outside(text, field)
    return ms


def add_duration_ms(now_ms: int, duration_ms: int, *, text: str, field: str) -> int:
    """``now_ms + duration_ms``, refused (naming the field) past the last representable time."""
    if now_ms + duration_ms > MAX_TIME_MS:
        raise UsageError(f"{field}: {text!r} from now is past 9999-12-31T23:59:59.999Z",
                         hint="give a shorter delay")
    return now_ms + duration_ms


def parse_duration_ms(text: str, *, field: str = "duration") -> int:
    """Parse ``30s``, ``5m``, ``2h``, ``1d``, ``500ms`` or ``1h30m`` into milliseconds."""
    value = text.strip()
    if len(value) > _MAX_DURATION_TEXT:
        raise UsageError(f"{field}: a duration of {len(value)} characters is not a duration",
                         hint="use a number and a unit: 500ms, 30s, 5m, 2h, 1d (or 1h30m)")
    pos, total = 0, 0
    for match in _DURATION_PART.finditer(value):
        if match.start() != pos:
            break
        total += int(match.group(1)) * _UNIT_MS[match.group(2)]
        pos = match.end()
    if pos != len(value) or not value:
        raise UsageError(
            f"{field}: {text!r} is not a duration",
            hint="use a number and a unit: 500ms, 30s, 5m, 2h, 1d (or 1h30m)",
        )
    return total


def format_duration_ms(ms: int) -> str:
    """Milliseconds as ``parse_duration_ms`` reads them, largest units first: ``400d``,
    ``1h30m``, ``1500ms`` is ``1s500ms``; ``0ms`` for nothing."""
    if ms <= 0:
        return f"{ms}ms"
    parts: list[str] = []
    for unit, size in sorted(_UNIT_MS.items(), key=lambda item: -item[1]):
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    return "".join(parts)


def format_time_ms(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with millisecond precision and a ``Z``.

    Total: a stored value outside 1970..9999 (written by an older build, or a hostile log)
    is shown as ``<ms> ms (out of range)`` instead of breaking whatever lists it."""
    if not 0 <= ms <= MAX_TIME_MS:
        return f"{ms} ms (out of range)"
    stamp = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
