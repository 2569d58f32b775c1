"""A shard result's ``detail`` as the CLI shows it: instants in ISO-8601 UTC.

The state machine writes some instants into a result's detail as epoch milliseconds
("message back on the timeline at 1796469819111 ms (retry 0)"); the text is part of the
stored result, so the core keeps it as it is (a replay must write the same bytes). Every
command prints times as ISO-8601 UTC, so the CLI rewrites each "at N ms" of a detail it
prints (``format_time_ms``: a value out of range says so).
"""

from __future__ import annotations

import re
from typing import Final

_AT_MS: Final = re.compile(r"\bat (\d{1,20}) ms\b")


def readable_detail(detail: str | None) -> str | None:
    """``detail`` with every "at N ms" written "at <ISO-8601 UTC>"."""
    if detail is None or " ms" not in detail:
        return detail
    from nereus.timespec import format_time_ms

    return _AT_MS.sub(lambda found: f"at {format_time_ms(int(found.group(1)))}", detail)
