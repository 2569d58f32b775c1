"""The JSON document any command prints with ``--json`` when it fails (exit status 1-5, 70).

``document`` keys of the error (``NereusError.document``: bad lines of a batch, the lines
an interrupted batch had acknowledged, ...) follow these; the man pages name them.
"""

from __future__ import annotations

import msgspec


class ErrorDocument(msgspec.Struct, frozen=True, kw_only=True):
    """What failed, what to do about it, and the exit status the process ends with."""

    ok: bool = False
    error: str
    hint: str | None
    exit_code: int
    # exit status 70 only: the file holding the traceback (None when none could be written)
    crash_file: str | msgspec.UnsetType | None = msgspec.UNSET


def error_document(error: ErrorDocument, more: dict[str, object] | None = None
                   ) -> dict[str, object]:
    """The document as printed: the error's keys, then ``more`` (the error's own keys)."""
    printed: dict[str, object] = msgspec.to_builtins(error)
    printed.update(more or {})
    return printed
