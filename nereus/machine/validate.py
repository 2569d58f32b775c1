"""Field checks shared by the handlers; each returns a REJECTED verdict or None."""

from __future__ import annotations

import re

from nereus.invisible_text import find_invisible
from nereus.machine.limits import Limits
from nereus.machine.reasons import Reason
from nereus.machine.verdict import Verdict, rejected
from nereus.terminal_text import find_control
from nereus.timespec import MAX_TIME_MS

LANE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_id(value: str, field: str, limits: Limits) -> Verdict | None:
    """Non-empty, printable (no control character), nothing that prints as nothing or as a
    plain space (``nereus.invisible_text``), no space at either end, at most
    ``max_id_bytes`` of UTF-8: an id prints as itself and like no other id. The CLI checks
    ids at the edge with this very function, so both say the same."""
    if not value:
        return rejected(Reason.INVALID_FIELD, f"{field} must not be empty")
    control = find_control(value)
    if control is not None:
        return rejected(Reason.INVALID_FIELD, f"{field} holds a control character "
                        f"(U+{ord(value[control]):04X}) at character {control}")
    invisible = find_invisible(value)
    if invisible is not None:
        return rejected(Reason.INVALID_FIELD, f"{field} holds an invisible or space-like "
                        f"character (U+{ord(value[invisible]):04X}) at character {invisible}")
    spaced = surrounding_space(value, field)
    if spaced is not None:
        return rejected(Reason.INVALID_FIELD, spaced)
    size = len(value.encode())
    if size > limits.max_id_bytes:
        return rejected(Reason.INVALID_FIELD, f"{field} is {size} bytes, over the limit of "
                        f"{limits.max_id_bytes}")
    return None


def surrounding_space(value: str, field: str) -> str | None:
    """What is wrong with a space at either end of ``value`` (it does not show when the id
    is printed), or None; a space inside an id is fine."""
    if value[:1] != " " and value[-1:] != " ":
        return None
    if not value.strip(" "):
        return f"{field} is only spaces"
    if value[0] == " ":
        return f"{field} starts with a space (character 0)"
    return f"{field} ends with a space (character {len(value) - 1})"


def check_lane(lane: str) -> Verdict | None:
    if not LANE_NAME.match(lane):
        return rejected(
            Reason.INVALID_FIELD,
            f"lane {lane!r} is not a lane name (1-64 of A-Z a-z 0-9 . _ -)",
        )
    return None


def check_times(deliver_at_ms: int, action_at_ms: int | None,
                expire_at_ms: int | None) -> Verdict | None:
    if action_at_ms is None:
        action_at_ms = deliver_at_ms
    if not (0 <= deliver_at_ms <= MAX_TIME_MS and 0 <= action_at_ms <= MAX_TIME_MS):
        field, value = (
            ("deliver_at_ms", deliver_at_ms) if not 0 <= deliver_at_ms <= MAX_TIME_MS
            else ("action_at_ms", action_at_ms)
        )
        return rejected(Reason.INVALID_FIELD, f"{field} {value} is outside 0..{MAX_TIME_MS} "
                        "(1970-01-01 to 9999-12-31 UTC)")
    if expire_at_ms is not None and expire_at_ms > MAX_TIME_MS:
        return rejected(Reason.INVALID_FIELD, f"expire_at_ms {expire_at_ms} is after "
                        f"{MAX_TIME_MS} (9999-12-31 UTC)")
    if expire_at_ms is not None and expire_at_ms < deliver_at_ms:
        return rejected(
            Reason.INVALID_FIELD,
            f"expire_at_ms {expire_at_ms} is before deliver_at_ms {deliver_at_ms}: "
            "the message could never be published",
        )
    return None


def check_headers(headers: dict[str, str], limits: Limits) -> Verdict | None:
    if not headers:
        return None
    if len(headers) > limits.max_headers:
        return rejected(
            Reason.INVALID_FIELD, f"{len(headers)} headers; at most {limits.max_headers} allowed"
        )
    chars = 0
    for name, value in headers.items():  # a loop: cheaper than two sum(map()) for a few
        chars += len(name) + len(value)
    if chars * 4 <= limits.max_header_bytes:  # UTF-8 is at most 4 bytes a character
        return None
    size = sum(len(k.encode()) + len(v.encode()) for k, v in headers.items())
    if size > limits.max_header_bytes:
        return rejected(
            Reason.INVALID_FIELD,
            f"headers take {size} bytes; at most {limits.max_header_bytes} allowed",
        )
    return None

