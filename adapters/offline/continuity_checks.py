"""State and log never diverge silently: the checks the engine, the CLI and ``doctor`` run.

A shard's state store says which log position it applied last; its Shard Log must still
hold that record (``nereus.continuity`` decides). When it does not — the log was cut,
replaced or restored from an older copy — the shard is stopped with a ``LogDiverged``
error that names the shard, the applied position, the log's end and the way back, and
nothing is appended to it: not by the engine (no activation barrier, no admissions: its
log is wrapped in ``DivergedLog``), not by the CLI (``Env.command_log`` checks first, and
the file log re-checks under its append lock with ``guard_file_log``).

A log that is *ahead* of the store is normal: those are records not applied yet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from nereus.adapters.backends.shardlog.delegating import DelegatingLog
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.protocol import PrunableLog, Receipt, ShardLog
from nereus.continuity import Divergence, applied_record_differs, log_ends_before
from nereus.errors import LogDiverged, NotFound, StoreError
from nereus.shard import ShardId
from nereus.state.store import ShardStore


def recovery_hint(shard: ShardId, state_path: Path | None = None) -> str:
    """The way back for a diverged shard, in the order an operator should try it."""
    state = str(state_path) if state_path is not None else "the shard's state directory"
    return (
        "nothing is appended to this shard until it is recovered. If the log's lost "
        "records can be put back (a backup of the segments), do that. Otherwise rebuild the "
        f"state from the log: stop the engine, move {state} aside and start the engine: it "
        "restores the shard from the newest Recovery Set member the log still extends past "
        f"(`nereus recovery-set show {shard}`; `nereus checkpoint restore ID --into DIR` "
        "to look at one first) and replays the log after it (the recover-on-new-home "
        "playbook does the same on a new home); the lost records' effects are then gone"
    )


def diverged(shard: ShardId, found: Divergence, state_path: Path | None = None) -> LogDiverged:
    """The error for a diverged shard."""
    return LogDiverged(
        f"shard {shard} has diverged from its Shard Log: {found.detail}",
        shard=str(shard), applied_position=found.applied_position, log_end=found.log_end,
        hint=recovery_hint(shard, state_path),
    )


def check_log_end(shard: ShardId, applied: int | None, log_end: int,
                  state_path: Path | None = None) -> None:
    """Raise ``LogDiverged`` if the log ends at or before the applied position (cheap: the
    log's end only; what the CLI does before it appends)."""
    found = log_ends_before(applied, log_end)
    if found is not None:
        raise diverged(shard, found, state_path)


def check_shard(shard: ShardId, store: ShardStore, log: ShardLog,
                state_path: Path | None = None) -> LogDiverged | None:
    """The full check (engine start, ``doctor``): the log extends past the applied position
    and, where the log still holds it, the record there is the one the state applied."""
    applied = store.applied_position()
    if applied is None:
        return None
    end = log.end_position()
    found = log_ends_before(applied, end)
    if found is None:
        start = log.start_position() if isinstance(log, PrunableLog) else 0
        if start <= applied:  # below a pruned log's start there is nothing left to compare
            records = log.read(applied, 1)
            record = records[0].payload if records and records[0].position == applied \
                else None
            found = applied_record_differs(store.get, applied, end, record)
    return None if found is None else diverged(shard, found, state_path)


def applied_position(path: Path) -> int | None:
    """The applied position of the database at ``path`` (read-only; None when there is no
    database or it cannot be read: then there is nothing to compare)."""
    if not (path / "CURRENT").exists():
        return None
    try:
        with ShardStore.open(path, read_only=True) as store:
            return store.applied_position()
    except (StoreError, NotFound):
        return None


def guard_file_log(shard: ShardId, log: FileShardLog,
                   applied: int | Callable[[], int | None] | None,
                   state_path: Path | None = None) -> None:
    """Make ``log`` refuse, under its append lock, any append while it ends at or before
    the applied position (a check before the append could race with a cut). ``applied``:
    the position, or how to read it now (an engine's live store: a shard that applied
    nothing when it was opened must not take an append at position 0 either once its
    segments were deleted under it)."""
    if applied is None:
        return

    def check(end: int) -> None:
        found = log_ends_before(applied() if callable(applied) else applied, end)
        if found is not None:
            raise diverged(shard, found, state_path)

    log.check_end = check


class DivergedLog(DelegatingLog):
    """A diverged shard's Shard Log, as its loop and the admin socket see it: read as ever,
    appended to never."""

    def __init__(self, log: ShardLog, error: LogDiverged) -> None:
        super().__init__(log)
        self.error = error
        self.description = getattr(log, "description", str(error.shard))

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        error = self.error
        raise LogDiverged(error.message, shard=error.shard, log_end=error.log_end,
                          applied_position=error.applied_position, hint=error.hint)
