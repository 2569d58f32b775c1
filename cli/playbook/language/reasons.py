"""What a command's own JSON document says went wrong, for a step whose checks failed.

``output.ok == true is false`` says only that something failed; the command said what:
``doctor``, ``recovery-set verify`` and ``checkpoint verify`` list their ``checks``
(``{"name", "ok", "detail"}``, a failed one with ``ok`` false), an error document has
``error`` and ``hint``. A failed step's detail carries these words after its own.
"""

from __future__ import annotations

from nereus.cli.playbook.language.expr import Json

MAX_REASONS = 5  # a document with more failed checks names this many and counts the rest


def reasons(output: Json) -> list[str]:
    """The failed checks (``name: detail``) and the error of ``output``, in its order; at
    most ``MAX_REASONS`` of them, then how many more."""
    if not isinstance(output, dict):
        return []
    found: list[str] = []
    checks = output.get("checks")
    if isinstance(checks, list):
        for check in checks:
            if isinstance(check, dict) and check.get("ok") is False and not check.get("skipped"):
                found.append(_check(check))
    for key in ("error", "hint"):
        value = output.get(key)
        if isinstance(value, str) and value:
            found.append(value)
    if len(found) > MAX_REASONS:
        return [*found[:MAX_REASONS], f"and {len(found) - MAX_REASONS} more"]
    return found


def _check(check: dict[str, Json]) -> str:
    name, detail, fix = check.get("name"), check.get("detail"), check.get("fix")
    text = ": ".join(str(part) for part in (name, detail) if part not in (None, ""))
    if isinstance(fix, str) and fix:
        text += f" (fix: {fix})"
    return text or "a check failed"
