"""Numbers from admin requests, checked: finite, in range, or a 400 naming the parameter.

``float("nan")`` parses, compares false with everything and slips through ``min``/``max``:
a NaN feed interval once made a status stream spin. Every number a request carries goes
through here.
"""

from __future__ import annotations

import math
from typing import Any

from nereus.errors import UsageError


def number(value: Any, name: str, *, low: float, high: float, default: float) -> float:
    """``value`` as a finite float within ``low..high`` (``default`` when absent)."""
    if value is None:
        return default
    try:
        found = float(value)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{name}: {str(value)[:40]!r} is not a number") from None
    if not math.isfinite(found) or not low <= found <= high:
        raise UsageError(f"{name}: {str(value)[:40]!r} is outside {low:g}..{high:g}")
    return found


def integer(value: Any, name: str, *, low: int, high: int, default: int) -> int:
    """``value`` as an int within ``low..high`` (``default`` when absent)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise UsageError(f"{name}: {str(value)[:40]!r} is not a whole number")
    text = str(value).strip()
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 18:
        raise UsageError(f"{name}: {text[:40]!r} is not a whole number in {low}..{high}")
    found = int(text)
    if not low <= found <= high:
        raise UsageError(f"{name}: {found} is outside {low}..{high}")
    return found
