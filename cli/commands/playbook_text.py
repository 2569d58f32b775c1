"""How ``nereus playbook`` prints for a person: a step's body (its command, conditions and
verdicts) and the live report of a run, one line per step as it goes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.playbook.language.documents import (
        PlannedStepView,
        StepDefinition,
        StepResult,
    )
    from nereus.cli.playbook.language.expr import Json
    from nereus.cli.playbook.language.plan import PlannedStep


def _quote(word: str) -> str:
    """A word as a shell would need it (templates stay readable: braces are not quoted)."""
    import shlex

    if word and not any(c in word for c in " \t\n'\"\\$`;&|<>()*?!#~"):
        return word
    return shlex.quote(word)


def print_step_body(out: Console, step: StepDefinition | PlannedStepView, *,
                     home: str | None, indent: str) -> None:
    """A step's body as ``show`` and ``--dry-run`` print it; ``home`` when it runs against
    another home than the run's."""
    from nereus.cli.output import safe_markup as escape
    from nereus.cli.playbook.language.documents import PlannedStepView, PlannedWait

    if step.description:
        out.print(f"{indent}[dim]{escape(step.description)}[/dim]")
    if step.for_each:
        out.print(f"{indent}for each item in: {escape(step.for_each)}")
    for condition in step.pre:
        out.print(f"{indent}pre:     {escape(condition)}")
    if step.confirm:
        out.print(f"{indent}confirm: {escape(step.confirm)}")
    shown_home = f"--home {home} " if home else ""
    # a dry run knows a for_each step's items when they come from what it could read
    commands = step.commands if isinstance(step, PlannedStepView) else [step.run]
    if not commands:
        out.print(f"{indent}run:     nothing: there are no items")
    for command in commands:
        out.print(f"{indent}run:     nereus {escape(shown_home)}--json "
                  f"{escape(' '.join(_quote(w) for w in command))}")
    if isinstance(step, PlannedStepView):
        for why in step.not_known:
            out.print(f"{indent}[dim]not known before the run: {escape(why)}[/dim]")
    if step.wait is not None:
        wait = step.wait
        if isinstance(wait, PlannedWait):
            timeout, interval, unit = str(wait.timeout_ms), str(wait.interval_ms), " ms"
        else:
            timeout, interval, unit = wait.timeout, wait.interval, ""
        out.print(f"{indent}wait until: {escape(wait.until)} (timeout {timeout}{unit}, "
                  f"every {interval}{unit})")
    for condition in step.post:
        out.print(f"{indent}post:    {escape(condition)}")
    if step.exit_codes != [0]:
        out.print(f"{indent}accepts exit status {', '.join(map(str, step.exit_codes))}")
    if step.continue_on_failure:
        out.print(f"{indent}on failure the run goes on (continue_on_failure)")
    if step.on_failure:
        out.print(f"{indent}on failure: {indented_lines(step.on_failure, indent + '            ')}")


def indented_lines(text: str, indent: str) -> str:
    """Text of several lines (paragraphs, a step's advice then the playbook's), each made
    terminal-safe, the later ones indented: a newline made safe as a whole would print as
    a literal ``\\x0a``. A document's string that ``Output.emit`` already made safe is
    split where its newlines were."""
    from nereus.cli.output import Shown
    from nereus.cli.output import safe_markup as escape

    if isinstance(text, Shown):
        return f"\n{indent}".join(text.split("\\x0a"))
    return f"\n{indent}".join(escape(line) for line in text.split("\n"))


def _verdict(detail: str, indent: str) -> str:
    """A failure's detail for the terminal: the checks' verdicts on the first line, what
    the command said went wrong one reason a line under it."""
    from nereus.cli.playbook.runner import COMMAND_SAYS

    verdicts, _, said = detail.partition(COMMAND_SAYS)
    lines = [verdicts, *(f"  {reason}" for reason in said.split("; ") if reason)]
    return indented_lines("\n".join(lines), indent)


class LiveReport:
    """Each step's outcome as one or two Rich lines, as it happens; a ``for_each`` step's
    items each with its own command line and verdict."""

    def __init__(self, console: Console, total: int, home: str) -> None:
        self.console = console
        self.total = total
        self.home = home  # the run's home; a step against another home says so
        self._last_wait: dict[str, str] = {}
        self._items: dict[str, tuple[int, list[str]]] = {}  # step -> (items, failed ones)

    def _command(self, planned: PlannedStep, args: list[str], indent: str) -> None:
        from nereus.cli.output import safe_markup as escape

        home = "" if planned.home == self.home else f"--home {_quote(planned.home)} "
        self.console.print(f"{indent}[dim]nereus {escape(home)}"
                           f"{escape(' '.join(_quote(a) for a in args))}[/dim]")

    def step_started(self, planned: PlannedStep, commands: list[list[str]]) -> None:
        from nereus.cli.output import safe_markup as escape

        step = planned.step
        self.console.print(f"[bold]▶ [{planned.index + 1}/{self.total}] {step.id}"
                           f"[/bold] {escape(step.title)}")
        if step.for_each is None:
            self._command(planned, commands[0] if commands else [], "    ")
            return
        self._items[step.id] = (len(commands), [])
        self.console.print(f"    for each of {len(commands)} item(s) of "
                           f"{escape(step.for_each.source)}")

    def item_started(self, planned: PlannedStep, item: Json, args: list[str]) -> None:
        self._command(planned, args, "    ")

    def item_finished(self, planned: PlannedStep, item: Json, ok: bool, detail: str) -> None:
        from nereus.cli.output import safe_markup as escape
        from nereus.cli.playbook.runner import item_label

        label = item_label(item)
        if ok:
            self.console.print(f"      [green]✓[/green] {escape(label)}")
            return
        self._items.setdefault(planned.step.id, (0, []))[1].append(label)
        self.console.print(f"      [red]✗[/red] {escape(label)}: "
                           f"{_verdict(detail, '        ')}")

    def waiting(self, planned: PlannedStep, polls: int, detail: str) -> None:
        from nereus.cli.output import safe_markup as escape

        if self._last_wait.get(planned.step.id) != detail or polls % 10 == 0:
            self._last_wait[planned.step.id] = detail
            self.console.print(f"    … waiting (poll {polls}): {escape(detail)}")

    def step_finished(self, planned: PlannedStep, result: StepResult) -> None:
        from nereus.cli.output import safe_markup as escape

        seconds = f"{result.elapsed_ms / 1000:.1f} s"
        if result.ok:
            self.console.print(f"  [green]✓[/green] {planned.step.id} passed ({seconds}"
                               + (f", {result.polls} polls" if result.polls > 1 else "") + ")")
            return
        count, failed = self._items.get(planned.step.id, (0, []))
        if failed:  # each item's failure is printed above, under its command
            why = (f"{len(failed)} of {count} item(s) failed: "
                   f"{escape(', '.join(failed))}")
        else:
            why = _verdict(result.detail, "    ")
        self.console.print(f"  [red]✗[/red] {planned.step.id} failed: {why}")
        if result.guidance:
            self.console.print("    [yellow]on failure:[/yellow] "
                               + indented_lines(result.guidance, "    "))
        if planned.step.continue_on_failure:
            self.console.print("    [dim](continue_on_failure: the run goes on)[/dim]")
