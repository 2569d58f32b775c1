"""The one exception root of Nereus Delay, with blame-typed subclasses.

Each subclass names who is to blame and carries the process exit code the CLI maps it to;
the mapping to an actual exit happens in exactly one place (``nereus.cli.main``). Bad
bytes inside a shard are never an exception: the state machine turns them into a
REJECTED result (see ``nereus.machine``).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit statuses, as the CLI contract and the man pages document them."""

    OK = 0
    NO = 1  # the operation ran and the answer is "no"
    USAGE = 2
    NOT_FOUND = 3
    ENGINE_UNREACHABLE = 4
    SERVICE_UNREACHABLE = 5
    RESULT_NOT_KNOWN = 6  # queued, but its result is not known yet (`nereus command show`)
    INTERNAL = 70  # a bug: one line on stderr, the traceback in a crash file (EX_SOFTWARE)


class NereusError(Exception):
    """Root of every error Nereus Delay raises on purpose."""

    exit_code: ExitCode = ExitCode.NO

    def __init__(self, message: str, *, hint: str | None = None,
                 document: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # more keys for the JSON error document (which lines, which receipts, ...)
        self.document = document or {}


class UsageError(NereusError):
    """The caller gave input we cannot act on (bad time, bad flag combination, bad file)."""

    exit_code = ExitCode.USAGE


class ConfigError(UsageError):
    """nereus.toml is missing, unparsable or invalid; names the file and line."""


class NotConfirmed(NereusError):
    """The operator was asked to confirm and said no: nothing was changed."""

    exit_code = ExitCode.NO


class NotFound(NereusError):
    """The named target (shard, message, checkpoint, database) does not exist."""

    exit_code = ExitCode.NOT_FOUND


class EngineUnreachable(NereusError):
    """The engine's admin socket does not answer."""

    exit_code = ExitCode.ENGINE_UNREACHABLE


class ShardNotHere(EngineUnreachable):
    """The engine asked does not own the shard (a cluster node, or a worker: the shard is
    another's, or between owners). Not a NotFound: nothing about the target is known here,
    so nothing may be concluded about whether it exists."""


class ServiceUnreachable(NereusError):
    """An external service (broker, object store) does not answer."""

    exit_code = ExitCode.SERVICE_UNREACHABLE


class ResultNotKnown(NereusError):
    """The command is durable in the Shard Log, but its applied result is not known yet."""

    exit_code = ExitCode.RESULT_NOT_KNOWN


class LogCorruption(NereusError):
    """A Shard Log holds a damaged record before its tail: reading stops, never skips."""

    exit_code = ExitCode.NO

    def __init__(self, message: str, *, path: str, offset: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path
        self.offset = offset


class StoreError(NereusError):
    """The state store cannot be opened or does not belong to the expected shard."""

    exit_code = ExitCode.NO


class StoreInUse(StoreError):
    """Another process (or this one) holds the shard database open: it is in use, not
    damaged, and must never be moved aside or replaced."""

    def __init__(self, message: str, *, holder_pid: int | None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.holder_pid = holder_pid


class LogDiverged(NereusError):
    """A shard's Shard Log and its state store disagree: the log ends before the applied
    position, or holds other bytes there. The shard stops; nothing is appended to it."""

    exit_code = ExitCode.NO

    def __init__(self, message: str, *, shard: str, applied_position: int, log_end: int,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.shard = shard
        self.applied_position = applied_position
        self.log_end = log_end
