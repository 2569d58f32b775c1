"""Control characters in text an operator will see: find them, and show them escaped.

Ids, keys, headers, reasons and log lines come from clients and operators; printed raw,
an escape sequence in one of them moves the cursor, rewrites the screen or sets the
window title of whoever reads it (the kubectl CVE-2021-25743 class). Ids may not hold
control characters at all (``nereus.machine.validate``); everything else is shown
escaped in human output (``\\x1b``, ``\\u202e``) and passed through unchanged in JSON.

"Control" here is every C0 and C1 control character, DEL, and the Unicode bidirectional
overrides and isolates that reorder what the terminal shows (Trojan Source).
"""

from __future__ import annotations

import re
from typing import Final

_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def find_control(text: str) -> int | None:
    """The index of the first control character in ``text``, or None."""
    found = _CONTROL.search(text)
    return None if found is None else found.start()


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character written as a visible escape."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escaped, text)
