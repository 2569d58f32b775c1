"""Operator mutations from the dashboard: run the ``nereus`` CLI itself, never a shortcut.

The dashboard is read-only until an operator presses a mutation key and gives a reason.
The change is then made by the same command an operator would type
(``nereus --home H --json lane close LANE --reason R --yes``), so identity (the current
user), idempotency key, receipts and exit codes follow exactly one set of rules — the
CLI's — and the dashboard only shows the JSON document it prints. The runner blocks; the
app calls it from a worker thread and is handed a ``MutationRunner`` so tests can record
calls instead of spawning processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

LaneAction = Literal["open", "close"]
Severity = Literal["information", "warning", "error"]

_NOT_APPLIED = ("REJECTED", "STALE")


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneMutation:
    """Open or close one lane's admission gate, with the operator's reason."""

    action: LaneAction
    lane: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MutationOutcome:
    """What the CLI did: its exit status and the one JSON document it printed (if any)."""

    mutation: LaneMutation
    exit_code: int
    document: Mapping[str, Any] | None
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class MutationRunner(Protocol):
    def run(self, mutation: LaneMutation) -> MutationOutcome:
        """Carry out ``mutation`` (blocking) and report what happened."""
        ...


def reason_problem(text: str) -> str | None:
    """Why ``text`` is not an acceptable reason (the CLI's rule: one is required), or None."""
    if not text.strip():
        return "a reason is required: it is recorded in the Shard Log with your name"
    return None


def cli_command() -> list[str]:
    """How to start this installation's CLI: the ``nereus`` script beside the interpreter,
    or the interpreter running its entry point (``nereus.cli`` has no ``__main__``)."""
    script = Path(sys.executable).parent / "nereus"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from nereus.cli.main import main; main()"]


def lane_argv(command: Sequence[str], home: Path, mutation: LaneMutation) -> list[str]:
    """The CLI line: confirmed in the dashboard already (``--yes``), and ``--wait`` so the
    notification reports the applied result rather than a queued receipt."""
    return [*command, "--home", str(home), "--json", "lane", mutation.action, mutation.lane,
            "--reason", mutation.reason, "--yes", "--wait"]


class CliMutationRunner:
    """Runs ``nereus lane open|close`` for this home in a subprocess."""

    def __init__(self, home: Path, *, command: Sequence[str] | None = None,
                 timeout_s: float = 120.0) -> None:
        self.home = Path(home)
        self.command = list(command) if command is not None else cli_command()
        self.timeout_s = timeout_s

    def run(self, mutation: LaneMutation) -> MutationOutcome:
        argv = lane_argv(self.command, self.home, mutation)
        env = {k: v for k, v in os.environ.items() if k != "NEREUS_OUTPUT"}
        env["NO_COLOR"] = "1"
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                                  stdin=subprocess.DEVNULL, timeout=self.timeout_s, env=env)
        except subprocess.TimeoutExpired:
            return MutationOutcome(mutation=mutation, exit_code=-1, document=None,
                                   stderr=f"`nereus lane {mutation.action}` did not finish "
                                          f"within {self.timeout_s:.0f} s")
        except OSError as exc:
            return MutationOutcome(mutation=mutation, exit_code=-1, document=None,
                                   stderr=f"could not run {argv[0]}: {exc}")
        return MutationOutcome(mutation=mutation, exit_code=proc.returncode,
                               document=_one_document(proc.stdout), stderr=proc.stderr)


def _one_document(text: str) -> Mapping[str, Any] | None:
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _receipt_list(receipts: Any) -> list[Mapping[str, Any]]:
    if not isinstance(receipts, Sequence) or isinstance(receipts, str):
        return []
    return [r for r in receipts if isinstance(r, Mapping)]


def _verdict(result: Any, receipts: Any = ()) -> str:
    """APPLIED / QUEUED / REJECTED (reasons) from the CLI's ``result`` field (a word, or
    a result object), with the receipts' reasons when it was not applied."""
    if result is None:
        return "QUEUED"
    if isinstance(result, str):
        reasons = dict.fromkeys(str(r["reason"]) for r in _receipt_list(receipts)
                                if r.get("reason"))
        if result in _NOT_APPLIED and reasons:
            return f"{result} ({', '.join(reasons)})"
        return result
    if isinstance(result, Mapping):
        status = str(result.get("result") or result.get("status") or "QUEUED")
        reason = result.get("reason")
        return f"{status} ({reason})" if reason and status in _NOT_APPLIED else status
    if isinstance(result, Sequence):
        verdicts = dict.fromkeys(_verdict(item) for item in result)
        return ", ".join(verdicts) or "QUEUED"
    return str(result)


def _receipts(receipts: Any) -> str:
    places = [f"{r.get('shard', '?')}@{r.get('source_position', '?')}"
              for r in _receipt_list(receipts)]
    return "receipts " + ", ".join(places) if places else ""


def describe_outcome(outcome: MutationOutcome) -> tuple[Severity, str, str]:
    """(severity, title, text) of the notification that reports ``outcome``."""
    mutation = outcome.mutation
    title = f"lane {mutation.action} {mutation.lane}"
    doc = outcome.document or {}
    if not outcome.ok:
        error = doc.get("error") or (outcome.stderr.strip().splitlines() or ["no output"])[-1]
        hint = doc.get("hint")
        text = f"failed (exit {outcome.exit_code}): {error}" + (f" — {hint}" if hint else "")
        return "error", title, text
    verdict = _verdict(doc.get("result"), doc.get("receipts"))
    parts = [verdict]
    if receipts := _receipts(doc.get("receipts")):
        parts.append(receipts)
    if doc.get("operator"):
        parts.append(f"as {doc['operator']}")
    severity: Severity = ("warning" if any(word in verdict for word in _NOT_APPLIED)
                          else "information")
    return severity, title, "; ".join(parts)
