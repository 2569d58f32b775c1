"""``nereus playbook``: list, show and run the scripted runbooks (``playbooks/*.toml`` and
``<home>/playbooks/*.toml``).

``run`` prints each step's outcome as it happens (stdout; stderr under ``--json``, whose
stdout is the one report document at the end), journals every step so ``--resume``
continues after the last completed one, and asks at confirmation points only when there is
a terminal to ask on: otherwise ``--yes`` is required and the run stops with exit 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from nereus.cli.commands.playbook_text import LiveReport, indented_lines, print_step_body
from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from rich.console import Console

    from nereus.cli.playbook.catalog import Found
    from nereus.cli.playbook.language.documents import (
        RunReport,
    )
    from nereus.cli.playbook.language.journal import Resume
    from nereus.cli.playbook.language.model import Playbook
    from nereus.cli.playbook.language.plan import Plan, PlannedStep
    from nereus.cli.playbook.runner import Answer

T = TypeVar("T")

app = typer.Typer(help="Scripted runbooks: list, show, run (with --dry-run and --resume).",
                  no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(
    metavar="NAME", help="A playbook name (`nereus playbook list`), or a path to a .toml file.")]


def _load(env: Env, name: str) -> tuple[Found, Playbook]:
    from nereus.cli.playbook.catalog import locate, read

    found = locate(env.home, name)
    return found, read(found)


@app.command("list")
def list_playbooks(ctx: typer.Context) -> None:
    """The shipped playbooks and the home's own (which shadow shipped ones by name)."""
    import msgspec

    from nereus.cli.playbook.catalog import discover, read
    from nereus.cli.playbook.language.documents import PlaybookRow
    from nereus.cli.playbook.language.load import PlaybookError

    env: Env = ctx.obj
    rows: list[PlaybookRow] = []
    for found in discover(env.home).values():
        try:
            playbook = read(found)
            title, problem = playbook.title, None
            required = [v.name for v in playbook.variables if v.required]
        except PlaybookError as exc:
            title, problem, required = "", exc.message, []
        rows.append(PlaybookRow(name=found.name, title=title, origin=found.origin,
                                shadows_shipped=found.shadows, path=str(found.path),
                                required_vars=required, error=problem))
    data = msgspec.to_builtins(rows)

    def human(out: Console) -> None:
        from rich.table import Table

        from nereus.cli.output import safe_markup as escape

        table = Table("playbook", "what it does", "needs", "from")
        for row in _shown(data, list[PlaybookRow]):
            origin = row.origin + (" (shadows shipped)" if row.shadows_shipped else "")
            title = (f"[red]unusable: {escape(row.error)}[/red]" if row.error
                     else escape(row.title))
            table.add_row(row.name, title, " ".join(f"{n}=" for n in row.required_vars),
                          origin)
        out.print(table)
        if not rows:
            out.print("no playbooks")

    env.output.emit(data, human)


def _shown(data: object, document: type[T]) -> T:
    """A document again as its type, after ``Output.emit`` made its strings terminal-safe
    in place: msgspec keeps the ``Shown`` strings, so what was escaped is not escaped
    again (a string built from them is, as it always was)."""
    import msgspec

    return msgspec.convert(data, document)


@app.command("show")
def show(ctx: typer.Context, name: NameArg) -> None:
    """A playbook's description, variables and steps, as written."""
    import msgspec

    from nereus.cli.playbook.language.documents import (
        PlaybookDefinition,
        step_definition,
        variable_definition,
    )

    env: Env = ctx.obj
    found, playbook = _load(env, name)
    data = msgspec.to_builtins(PlaybookDefinition(
        name=playbook.name, title=playbook.title, description=playbook.description,
        origin=found.origin, path=str(found.path), shadows_shipped=found.shadows,
        on_failure=playbook.on_failure.source if playbook.on_failure else None,
        variables=[variable_definition(v) for v in playbook.variables],
        steps=[step_definition(s) for s in playbook.steps]))

    def human(out: Console) -> None:
        from nereus.cli.output import safe_markup as escape

        shown = _shown(data, PlaybookDefinition)
        out.print(f"[bold]{playbook.name}[/bold] — {escape(playbook.title)}  "
                  f"[dim]({found.origin}: {found.path})[/dim]")
        out.print(escape(playbook.description))
        out.print("\n[bold]variables[/bold]" if playbook.variables else "\nno variables")
        for v in playbook.variables:
            default = "required" if v.required else f"default {v.default!r}"
            choices = f", one of {', '.join(v.choices)}" if v.choices else ""
            out.print(f"  {v.name} ({v.type}, {default}{choices}): {escape(v.description)}")
        out.print("\n[bold]steps[/bold]")
        for number, step in enumerate(shown.steps, start=1):
            out.print(f"  {number}. [bold]{step.id}[/bold] — {escape(step.title)}")
            print_step_body(out, step, home=step.home, indent="     ")
        if shown.on_failure:
            out.print(f"\n[bold]on failure[/bold] {indented_lines(shown.on_failure, '  ')}")

    env.output.emit(data, human)


# -- run -----------------------------------------------------------------------------------------


def _ask(question: str, planned: PlannedStep) -> Answer:
    """Ask on the terminal; without one there is nobody to ask."""
    import sys

    if not sys.stdin.isatty():
        return "unavailable"
    try:
        return "yes" if typer.confirm(f"step {planned.step.id}: {question}", default=False,
                                      err=True) else "no"
    except (EOFError, typer.Abort):
        return "unavailable"


def _new_run_id(now_ms: int) -> str:
    import uuid
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(now_ms / 1000, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


def _dry_run(env: Env, found: Found, plan: Plan, journal: str, point: Resume | None) -> None:
    import msgspec

    from nereus.cli.playbook.dry_read import read_ahead
    from nereus.cli.playbook.invoke import SubprocessInvoke
    from nereus.cli.playbook.language.documents import DryRunPlan
    from nereus.cli.playbook.language.plan import dry_run_plan

    start_index = point.next_index if point else 0
    outputs, unread = read_ahead(plan, SubprocessInvoke(), start_index=start_index,
                                 outputs=dict(point.outputs) if point else None)
    data = msgspec.to_builtins(dry_run_plan(
        plan, path=str(found.path), journal=journal, start_index=start_index,
        resuming=point is not None, outputs=outputs, unread=unread))

    def human(out: Console) -> None:
        from nereus.cli.output import safe_markup as escape

        shown = _shown(data, DryRunPlan)
        read = (f"; read to fill in the plan: {', '.join(shown.read)}" if shown.read else "")
        out.print(f"[bold]Plan of {plan.playbook.name}[/bold] — {escape(plan.playbook.title)}"
                  f" [dim](dry run: nothing is changed, nothing is written{read})[/dim]")
        out.print(f"home: {plan.home}")
        values = "  ".join(f"{k}={v}" for k, v in shown.variables.items())
        out.print(f"variables: {escape(values) or 'none'}")
        for step in shown.steps:
            done = " [dim](done before: resume skips it)[/dim]" if step.done_before else ""
            now = " [dim](read now: later steps use its output)[/dim]" if step.read else ""
            out.print(f"\n{step.index}. [bold]{step.id}[/bold] — "
                      f"{escape(step.title)}{done}{now}")
            print_step_body(out, step, home=None if step.home == plan.home else step.home,
                             indent="   ")
        if plan.playbook.on_failure is not None:
            out.print(f"\n[bold]on failure[/bold] "
                      f"{indented_lines(plan.playbook.on_failure.source, '  ')}")

    env.output.emit(data, human)


@app.command("run")
def run(
    ctx: typer.Context,
    name: NameArg,
    var: Annotated[list[str] | None, typer.Option(
        "--var", metavar="NAME=VALUE", help="Set a variable (repeat for several).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the whole plan with variables filled in; run and write "
        "nothing.")] = False,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the last unfinished run from its journal, after its last "
        "completed step, with its variables.")] = False,
    yes: Annotated[bool, typer.Option(
        "--yes", help="Accept every confirmation point (needed without a terminal).")] = False,
) -> None:
    """Run a playbook's steps in order, checking each; stop at the first failure."""
    import time
    from pathlib import Path

    from nereus.cli.playbook.journal_file import read_journal
    from nereus.cli.playbook.language.journal import resume_point
    from nereus.cli.playbook.language.plan import make_plan, parse_assignments, resolve_variables
    from nereus.layout import HomeLayout

    env: Env = ctx.obj
    found, playbook = _load(env, name)
    given = parse_assignments(var or [])
    home = str(env.home.absolute())
    journal_path = HomeLayout(Path(home)).playbook_journal(playbook.name)

    def prepare() -> tuple[Plan, Resume | None]:
        entries = read_journal(journal_path)
        point = None
        if resume:
            point = resume_point(playbook, entries, given, journal=str(journal_path))
            raw = {k: str(v) for k, v in point.variables.items()
                   if playbook.variable(k) is not None} | given
            variables = resolve_variables(playbook, raw)
            run_id = point.run_id
        else:
            variables = resolve_variables(playbook, given)
            run_id = "<run_id>" if dry_run else _new_run_id(time.time_ns() // 1_000_000)
        return make_plan(playbook, variables, run_id=run_id, home=home), point

    plan, point = prepare()  # usage errors surface before anything is written
    if dry_run:
        _dry_run(env, found, plan, str(journal_path), point)
        return
    _ = env.config  # a run needs an initialised home (exit 3 naming it otherwise)
    report = _run_journaled(env, found, playbook, journal_path, prepare, yes=yes)
    _emit_report(env, report)
    if report.exit_code:
        raise Answered(ExitCode(report.exit_code))


def _run_journaled(env: Env, found: Found, playbook: Playbook, journal_path: Path,
                   prepare: Callable[[], tuple[Plan, Resume | None]], *,
                   yes: bool) -> RunReport:
    """Run the plan under the journal's lock (planned again there: another run may have
    written), saying first whether it starts, resumes or only finishes a run."""
    from nereus.cli.playbook.invoke import SubprocessInvoke
    from nereus.cli.playbook.journal_file import JournalFile, read_journal
    from nereus.cli.playbook.language.journal import unfinished
    from nereus.cli.playbook.runner import Runner

    home = str(env.home.absolute())
    console = env.output.err if env.output.json_mode else env.output.out
    with JournalFile(journal_path) as journal:
        plan, point = prepare()  # again under the lock: another run may have written
        if point is None:
            previous = unfinished(read_journal(journal_path))
            if previous is not None:
                env.output.warn(f"run {previous.run_id} of {playbook.name} stopped before "
                                "finishing; this starts a new run (--resume would continue "
                                "that one)")
        elif point.next_index >= len(plan.steps):
            console.print(f"run {plan.run_id}: every step was already done; finishing it")
        console.print(f"[bold]playbook {playbook.name}[/bold] run {plan.run_id}"
                      + (f", resuming at step {point.next_index + 1}" if point else "")
                      + f" [dim](journal {journal_path})[/dim]")
        runner = Runner(plan=plan, journal=journal, journal_path=str(journal_path),
                        source=str(found.path), invoke=SubprocessInvoke(), confirm=_ask,
                        reporter=LiveReport(console, len(plan.steps), home), assume_yes=yes,
                        resumed=point is not None,
                        start_index=point.next_index if point else 0,
                        outputs=dict(point.outputs) if point else {},
                        finished_before=point.finished if point else {})
        return runner.run()


def _emit_report(env: Env, report: RunReport) -> None:
    import msgspec

    data = msgspec.to_builtins(report)

    def human(out: Console) -> None:
        from nereus.cli.output import safe_markup as escape

        if report.ok:
            out.print(f"[green]OK[/green] {report.name}: {escape(report.detail)} "
                      f"[dim](journal {report.journal})[/dim]")
            return
        if report.stopped_at is None:
            out.print(f"[red]FAILED[/red] {report.name}: {escape(report.detail)} "
                      f"[dim](journal {report.journal})[/dim]")
            return
        out.print(f"[red]STOPPED[/red] {report.name} at step {report.stopped_at} "
                  f"({report.stop_reason}): {escape(report.detail)}")
        out.print(f"[dim]journal {report.journal}; continue with `nereus playbook run "
                  f"{report.name} --resume`[/dim]")

    if report.stop_reason == "needs_confirmation" and not env.output.json_mode:
        env.output.error(report.detail)  # a program reads it in the report's detail
    env.output.emit(data, human)
