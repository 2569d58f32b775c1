"""How numbers read on the dashboard: short, fixed-width-friendly, and "-" for unknown.

Pure functions only, so view-model tests and snapshots see exactly what the screen shows.
"""

from __future__ import annotations

from collections.abc import Sequence

MISSING = "-"
_BARS = "▁▂▃▄▅▆▇█"


def fmt_int(value: int | None) -> str:
    """An integer with thousands separators; ``-`` when the engine did not say."""
    return MISSING if value is None else f"{value:,}"


def fmt_backlog(value: int | None, capped: bool) -> str:
    """A due backlog; ``+`` when the engine counted only up to its cap (there are more)."""
    return fmt_int(value) + ("+" if capped and value is not None else "")


def fmt_due_lag(lag_ms: int | None, due_backlog: int | None) -> str:
    """How late a lane's due messages are. The engine gives no lag when nothing due waits
    (its lag is over the due backlog): that is no lag, ``0ms``, not unknown, so a lane that
    publishes as fast as messages fall due reads 0ms, not ``-``."""
    if lag_ms is None and due_backlog == 0:
        return fmt_ms(0)
    return fmt_ms(lag_ms)


def fmt_ms(value: int | None) -> str:
    """A duration in the largest unit that keeps it short: 850ms, 3.2s, 4m05s, 2h10m, 3d04h."""
    if value is None:
        return MISSING
    if value < 0:
        return "-" + fmt_ms(-value)
    if value < 1_000:
        return f"{value}ms"
    if value < 60_000:
        return f"{value / 1000:.1f}s"
    seconds = value // 1000
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86_400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86_400}d{seconds % 86_400 // 3600:02d}h"


def fmt_rate(value: float | None) -> str:
    """Events per second with one decimal (``-`` until two samples exist)."""
    return MISSING if value is None else f"{value:.1f}/s"


def fmt_text(value: object) -> str:
    """Any optional value as text; None and empty become ``-``."""
    if value is None or value == "":
        return MISSING
    return str(value)


def spark_text(values: Sequence[float], width: int) -> str:
    """The last ``width`` values as block characters scaled to their maximum.

    A text sparkline fits in a table cell, so every lane gets its chart even at 80 columns;
    all-zero series draw as a flat baseline rather than nothing.
    """
    tail = list(values)[-width:] if width > 0 else []
    if not tail:
        return ""
    top = max(tail)
    if top <= 0:
        return _BARS[0] * len(tail)
    last = len(_BARS) - 1
    return "".join(_BARS[min(last, max(0, round(value / top * last)))] for value in tail)
