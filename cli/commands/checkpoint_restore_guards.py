"""What ``nereus checkpoint restore`` refuses before and while it writes: a live store,
a target that is not a directory, replacing a directory without --force (and, for one a
restore did not create, without a confirmation); a SIGTERM leaves through its clean-up."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from nereus.adapters.offline.restore_target import Target


def restore_target(into: Path, protected: list[tuple[Path, str]]) -> Target:
    """``--into`` as it is now; refused if it is live or not a directory."""
    from nereus.adapters.offline.restore_target import inspect_target
    from nereus.errors import NereusError, UsageError

    target = inspect_target(into, protected=protected)
    if target.live is not None:
        raise NereusError(f"refusing to restore there: {target.live.reason}",
                          hint=target.live.hint)
    if target.path.exists() and not target.path.is_dir():
        raise UsageError(f"--into {into} is not a directory", hint="name a directory")
    return target


def refuse_live(target: Target, protected: list[tuple[Path, str]], *,
                replacing: bool) -> None:
    """Refuse to move a restore into place where a store is live now."""
    from nereus.adapters.offline.restore_target import live_store
    from nereus.errors import NereusError

    live = live_store(target.path, replacing=replacing, restored=target.state == "restored",
                      protected=protected)
    if live is not None:
        raise NereusError(f"refusing to restore there: {live.reason}", hint=live.hint)


def may_replace(env: Env, target: Target, into: Path, checkpoint_id: str, *,
                force: bool, yes: bool) -> None:
    """A non-empty ``--into`` needs ``--force``; one a restore did not create also needs a
    confirmation (``--yes``, or a prompt on a terminal)."""
    import sys

    from nereus.errors import NereusError, NotConfirmed, UsageError

    if target.state == "restored" and not force:
        raise NereusError(
            f"{into} is not empty: it holds checkpoint {target.restored_checkpoint}, "
            "restored earlier", hint="pass --force to replace it, or choose a new directory")
    if target.state == "foreign":
        if not force:
            raise NereusError(f"{into} is not empty and was not created by a restore",
                              hint="choose a new or empty directory, or pass --force (and "
                              "confirm) to replace its contents")
        if not yes:
            question = (f"replace the contents of {into} (not created by a restore) with "
                        f"checkpoint {checkpoint_id}")
            if not sys.stdin.isatty():
                raise UsageError(f"{question}: needs confirmation and there is no terminal to "
                                 "ask on", hint="pass --yes to confirm in a script, or "
                                 "choose a new directory")
            if not typer.confirm(f"{question}?", default=False, err=True):
                raise NotConfirmed(f"not confirmed: {into} was left as it was")


@contextlib.contextmanager
def terminated_cleanly() -> Iterator[None]:
    """SIGTERM during the block exits through ``finally`` clauses (status 143), so a
    restore that is stopped removes its staging directory like one that fails."""
    import signal

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
