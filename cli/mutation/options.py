"""Who does an operator mutation and why: the options every mutation command takes, and
the ``Identity`` they make (operator, reason, idempotency key, precondition)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

import typer

# the options every mutation command takes (Typer reads these annotations)
ReasonOpt = Annotated[str, typer.Option(
    "--reason", help="Why (required; recorded in the Shard Log with your identity).")]
AsOpt = Annotated[str | None, typer.Option(
    "--as", help="Operator identity to record (default: the user running nereus).")]
KeyOpt = Annotated[str | None, typer.Option(
    "--idempotency-key",
    help="Deduplication key (default: derived from the command's content, so re-running "
         "the same command is a no-op with the same result).")]
PreconditionOpt = Annotated[str | None, typer.Option(
    "--precondition", "--precondition-digest",
    help="Precondition digest from an earlier --dry-run: REJECTED as STALE if the target "
         "changed since (default: the state as it is now).")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Show what would change (messages, lanes, attempts); write nothing.")]
YesOpt = Annotated[bool, typer.Option(
    "--yes", "-y", help="Do not ask for confirmation (scripts; required without a terminal).")]
WaitOpt = Annotated[bool, typer.Option(
    "--wait", help="Wait for the applied result (needs the engine).")]


@dataclass(frozen=True)


class Identity:
    """Who does it and why, and the key that makes it idempotent."""

    operator: str
    reason: str
    idempotency_key: str | None  # None: derive one per shard from the content
    precondition: str | None


def identity(operator: str | None, reason: str, key: str | None,
             precondition: str | None) -> Identity:
    from nereus.errors import UsageError

    if not reason.strip():
        raise UsageError("--reason must say why: it is recorded in the Shard Log with your "
                         "identity (the audit trail)")
    who = operator if operator is not None else _user()
    if not who.strip():
        raise UsageError("--as must name the operator")
    if key is not None and not key.strip():
        raise UsageError("--idempotency-key must not be blank")
    return Identity(who, reason, key, precondition)


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return os.environ.get("USER", "") or f"uid-{os.getuid()}"
