"""Executing a playbook plan: run each step's command, judge it, journal it, stop at the
first failure (unless the step says to go on), and say what happened.

What a step does, in order: its ``pre`` conditions (over variables and earlier outputs);
its ``for_each`` list; its confirmation (``--yes`` accepts it; without an operator to ask,
the run stops with exit 2 so a script never hangs); ``step_started`` in the journal; the
command (or, for a ``wait`` step, the command repeated every interval until ``wait.until``
holds, within its timeout); the exit status and ``post`` conditions; ``step_finished`` in
the journal. Every journal line is fsynced before the next action, so ``--resume`` never
skips a step that did not complete.

Time and I/O are injected (``Clock``, ``Invoke``, ``Confirm``, ``Reporter``), so the
loop is tested without subprocesses or sleeping.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

import msgspec

from nereus.cli.playbook.invoke import Invocation, Invoke
from nereus.cli.playbook.journal_file import JournalFile
from nereus.cli.playbook.language.documents import CheckResult, RunReport, StepResult
from nereus.cli.playbook.language.expr import ExpressionError, Json
from nereus.cli.playbook.language.journal import (
    RunFinished,
    RunStarted,
    RunStopped,
    StepFinished,
    StepStarted,
)
from nereus.cli.playbook.language.plan import (
    Plan,
    PlannedStep,
    guidance,
    items_of,
    judge,
    render_args,
)
from nereus.cli.playbook.language.reasons import reasons
from nereus.cli.playbook.language.template import render, render_known
from nereus.timespec import format_time_ms

Answer = Literal["yes", "no", "unavailable"]
USAGE_EXIT = 2


class Clock(Protocol):
    def monotonic_ms(self) -> int: ...

    def wall_ms(self) -> int: ...

    def sleep_ms(self, ms: int) -> None: ...


class SystemClock:
    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep_ms(self, ms: int) -> None:
        time.sleep(ms / 1000)


class Confirm(Protocol):
    def __call__(self, question: str, planned: PlannedStep) -> Answer: ...


class Reporter(Protocol):
    """Live progress for the operator (the CLI draws it with Rich). A ``for_each`` step
    starts with every item's command line and reports each item as it runs and ends."""

    def step_started(self, planned: PlannedStep, commands: list[list[str]]) -> None: ...

    def item_started(self, planned: PlannedStep, item: Json, args: list[str]) -> None: ...

    def item_finished(self, planned: PlannedStep, item: Json, ok: bool, detail: str) -> None: ...

    def waiting(self, planned: PlannedStep, polls: int, detail: str) -> None: ...

    def step_finished(self, planned: PlannedStep, result: StepResult) -> None: ...


StopReason = Literal["failed", "declined", "needs_confirmation"]


class _Stop(Exception):
    def __init__(self, reason: StopReason, exit_code: int, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.exit_code = exit_code
        self.detail = detail


@dataclass
class Runner:
    plan: Plan
    journal: JournalFile
    journal_path: str
    source: str  # where the playbook was read from
    invoke: Invoke
    confirm: Confirm
    reporter: Reporter
    assume_yes: bool = False
    clock: Clock = field(default_factory=SystemClock)
    resumed: bool = False
    start_index: int = 0
    outputs: dict[str, Json] = field(default_factory=dict)  # of steps done before
    finished_before: Mapping[str, StepFinished] = field(default_factory=dict)

    def _at(self) -> str:
        return format_time_ms(self.clock.wall_ms())

    def run(self) -> RunReport:
        plan = self.plan
        self.journal.append(RunStarted(
            run_id=plan.run_id, playbook=plan.playbook.name, source=self.source,
            step_ids=list(plan.playbook.step_ids), variables=dict(plan.variables),
            resumed=self.resumed, at=self._at()))
        results: list[StepResult] = []
        stop: _Stop | None = None
        stopped_at = None
        for planned in plan.steps:
            step = planned.step
            if planned.index < self.start_index:
                done = self.finished_before.get(step.id)
                results.append(StepResult(
                    id=step.id, title=step.title, status="done_before",
                    ok=done.ok if done else True, exit_code=done.exit_code if done else None,
                    output=self.outputs.get(step.id), detail="completed by an earlier "
                    "attempt of this run (from the journal)"))
                continue
            if stop is not None:
                results.append(StepResult(id=step.id, title=step.title, status="not_run",
                                          ok=None))
                continue
            try:
                result = self._step(planned)
            except _Stop as exc:
                stop, stopped_at = exc, step.id
                results.append(StepResult(id=step.id, title=step.title, status=exc.reason,
                                          ok=None, detail=exc.detail))
                continue
            except KeyboardInterrupt:
                self.journal.append(RunStopped(
                    run_id=plan.run_id, step=step.id, reason="interrupted", exit_code=130,
                    detail="interrupted by the operator", at=self._at()))
                raise
            results.append(result)
            self.outputs[step.id] = result.output
            if result.ok is False and not step.continue_on_failure:
                stop = _Stop("failed", 1, f"step {step.id} failed: {result.detail}")
                stopped_at = step.id
        if stop is not None:
            self.journal.append(RunStopped(run_id=plan.run_id, step=stopped_at,
                                           reason=stop.reason, exit_code=stop.exit_code,
                                           detail=stop.detail, at=self._at()))
            return self._report(results, False, stop.exit_code, stopped_at, stop.reason,
                                stop.detail)
        ok = all(r.ok is not False for r in results)
        self.journal.append(RunFinished(run_id=plan.run_id, ok=ok, at=self._at()))
        failed = [r.id for r in results if r.ok is False]
        detail = "every step passed" if ok else f"failed: {', '.join(failed)}"
        return self._report(results, ok, 0 if ok else 1, None, None, detail)

    def _report(self, results: list[StepResult], ok: bool, code: int, stopped_at: str | None,
                reason: StopReason | None, detail: str) -> RunReport:
        return RunReport(name=self.plan.playbook.name, run_id=self.plan.run_id, ok=ok,
                         exit_code=code, resumed=self.resumed, journal=self.journal_path,
                         variables=dict(self.plan.variables), steps=results,
                         stopped_at=stopped_at, stop_reason=reason, detail=detail,
                         path=self.source)

    # -- one step ----------------------------------------------------------------------------

    def _finish(self, planned: PlannedStep, result: StepResult) -> StepResult:
        step = planned.step
        if result.ok is False:
            scope = self.plan.scope(self.outputs, output=result.output,
                                    exit_code=result.exit_code)
            result = msgspec.structs.replace(
                result, guidance=guidance(step, self.plan.playbook, scope))
        self.journal.append(StepFinished(
            run_id=self.plan.run_id, step=step.id, index=planned.index, ok=bool(result.ok),
            advance=bool(result.ok) or step.continue_on_failure, exit_code=result.exit_code,
            output=result.output, checks=list(result.checks),
            detail=result.detail, at=self._at(), polls=result.polls))
        self.reporter.step_finished(planned, result)
        return result

    def _step(self, planned: PlannedStep) -> StepResult:
        step = planned.step
        scope = self.plan.scope(self.outputs)
        failed = StepResult(id=step.id, title=step.title, status="failed", ok=False,
                            home=planned.home)
        pre = judge(step.pre, scope)
        if not all(c.ok for c in pre):
            return self._finish(planned, msgspec.structs.replace(
                failed, checks=pre,
                detail="precondition: " + "; ".join(c.detail for c in pre if not c.ok)))
        try:
            items: list[Json] = items_of(step, scope) if step.for_each is not None else [None]
            argv = [render_args(step, {**scope, "item": item} if step.for_each else scope)
                    for item in items]
        except ExpressionError as exc:
            return self._finish(planned, msgspec.structs.replace(failed, checks=pre,
                                                                 detail=exc.message))
        if step.confirm is not None:
            self._confirm(planned, scope)
        self.journal.append(StepStarted(
            run_id=self.plan.run_id, step=step.id, index=planned.index,
            args=argv[0] if argv else [], home=planned.home, at=self._at()))
        self.reporter.step_started(planned, argv)
        started = self.clock.monotonic_ms()
        outputs: list[Json] = []
        checks: list[CheckResult] = list(pre)
        problems: list[str] = []
        codes: list[int | None] = []
        polls = 0
        for item, args in zip(items, argv, strict=True):
            item_scope = {**scope, "item": item} if step.for_each is not None else scope
            if step.for_each is not None:
                self.reporter.item_started(planned, item, args)
            ok, invocation, item_checks, detail, ran = self._run_one(planned, args, item_scope)
            if step.for_each is not None:
                self.reporter.item_finished(planned, item, ok, detail)
            polls += ran
            prefix = f"[{item_label(item)}] " if step.for_each is not None else ""
            checks.extend(CheckResult(condition=prefix + c.condition, ok=c.ok, detail=c.detail)
                          for c in item_checks)
            outputs.append(invocation.output if invocation else None)
            codes.append(invocation.exit_code if invocation else None)
            if not ok:
                problems.append(prefix + detail)
        failing = [c for c in codes if c != 0]
        return self._finish(planned, StepResult(
            id=step.id, title=step.title, status="failed" if problems else "ok",
            ok=not problems, args=argv[0] if len(argv) == 1 else [" ".join(a) for a in argv],
            home=planned.home,
            exit_code=failing[0] if failing else (codes[0] if codes else None),
            output=outputs if step.for_each is not None else outputs[0], checks=checks,
            detail="; ".join(problems) if problems else (
                f"{len(items)} item(s) passed" if step.for_each is not None else "passed"),
            polls=polls, elapsed_ms=self.clock.monotonic_ms() - started))

    def _confirm(self, planned: PlannedStep, scope: dict[str, Json]) -> None:
        step = planned.step
        assert step.confirm is not None
        try:
            question = render(step.confirm, scope)
        except ExpressionError:
            try:
                question = render_known(step.confirm, scope)
            except ExpressionError:  # a hole is null or wrong: ask with the text as written
                question = step.confirm.source
        if self.assume_yes:
            return
        answer = self.confirm(question, planned)
        if answer == "no":
            raise _Stop("declined", 1, f"the operator declined step {step.id}: {question}")
        if answer == "unavailable":
            raise _Stop("needs_confirmation", USAGE_EXIT,
                        f"step {step.id} asks for confirmation ({question}) and there is no "
                        "terminal to ask on: run it from a terminal, or pass --yes (with "
                        "--resume to continue this run)")

    def _run_one(self, planned: PlannedStep, args: list[str], scope: dict[str, Json],
                 ) -> tuple[bool, Invocation | None, list[CheckResult], str, int]:
        """Run (or, for a wait step, poll) one command: ok, its last invocation, checks,
        the failure detail, how many times it ran."""
        step = planned.step
        if step.wait is None:
            invocation = self.invoke(args, home=planned.home, timeout_ms=planned.timeout_ms)
            if invocation.exit_code not in step.exit_codes:
                return (False, invocation, [],
                        f"`nereus {' '.join(args)}` exited {invocation.exit_code}: "
                        f"{invocation.error_text()}", 1)
            checks = judge(step.post, self._after(scope, invocation))
            failed = [c.detail for c in checks if not c.ok]
            return not failed, invocation, checks, _failure(failed, invocation), 1
        assert planned.wait_timeout_ms is not None and planned.wait_interval_ms is not None
        deadline = self.clock.monotonic_ms() + planned.wait_timeout_ms
        polls = 0
        last = "never ran"
        while True:
            invocation = self.invoke(args, home=planned.home,
                                     timeout_ms=min(planned.timeout_ms,
                                                    max(1, deadline - self.clock.monotonic_ms())))
            polls += 1
            if invocation.exit_code == USAGE_EXIT:
                return (False, invocation, [], f"`nereus {' '.join(args)}` exited 2 (usage): "
                        f"{invocation.error_text()}", polls)
            if invocation.exit_code in step.exit_codes:
                after = self._after(scope, invocation)
                (until,) = judge([step.wait.until], after)
                if until.ok:
                    checks = [until, *judge(step.post, after)]
                    failed = [c.detail for c in checks if not c.ok]
                    return not failed, invocation, checks, _failure(failed, invocation), polls
                last = until.detail
            else:
                last = f"exited {invocation.exit_code}: {invocation.error_text()}"
            self.reporter.waiting(planned, polls, last)
            remaining = deadline - self.clock.monotonic_ms()
            if remaining <= 0:
                timeout = planned.wait_timeout_ms / 1000
                return (False, invocation,
                        [CheckResult(condition=step.wait.until.source, ok=False,
                                     detail=last)],
                        f"`{step.wait.until.source}` still not true after {timeout:g} s "
                        f"({polls} polls); last: {last}", polls)
            self.clock.sleep_ms(min(planned.wait_interval_ms, remaining))

    def _after(self, scope: dict[str, Json], invocation: Invocation) -> dict[str, Json]:
        return {**scope, "output": invocation.output, "exit_code": invocation.exit_code}


COMMAND_SAYS = " — the command says: "  # between a step's verdicts and the command's words


def _failure(failed: list[str], invocation: Invocation) -> str:
    """The failed checks' verdicts, then what the command's own document says went wrong
    (its failed checks, its error): "" when nothing failed."""
    if not failed:
        return ""
    said = reasons(invocation.output)
    return "; ".join(failed) + (f"{COMMAND_SAYS}{'; '.join(said)}" if said else "")


def item_label(item: Json) -> str:
    """A ``for_each`` item as a failure names it: a string as it is, anything else as
    JSON."""
    return item if isinstance(item, str) else json.dumps(item, sort_keys=True)
