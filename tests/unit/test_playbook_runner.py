"""The playbook runner with its I/O injected: fake commands, a fake clock, a recording
reporter. Order of steps, stops, confirmations, waits with deadlines, for_each, resume,
and the journal file it writes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from nereus.cli.playbook.invoke import Invocation, parse_output
from nereus.cli.playbook.journal_file import JournalBusy, JournalFile, read_journal
from nereus.cli.playbook.language.documents import StepResult
from nereus.cli.playbook.language.expr import Json
from nereus.cli.playbook.language.journal import (
    RunFinished,
    RunStarted,
    RunStopped,
    StepFinished,
    StepStarted,
    resume_point,
)
from nereus.cli.playbook.language.load import load_playbook
from nereus.cli.playbook.language.plan import Plan, PlannedStep, make_plan, resolve_variables
from nereus.cli.playbook.runner import Answer, Runner

TEXT = '''
description = "Runner test."
on_failure = "general advice for {lane}"

[vars.lane]
description = "the lane"
default = "local"

[[steps]]
id = "look"
title = "Look"
run = ["lane", "list"]
post = ["find(output, 'lane', lane) != null"]
on_failure = "no lane {lane}"

[[steps]]
id = "close"
title = "Close"
confirm = "Close {lane} ({find(steps.look, 'lane', lane).in_flight} in flight)?"
run = ["lane", "close", "{lane}", "--idempotency-key", "k-{run_id}"]
post = ["output.result == 'APPLIED'"]

[[steps]]
id = "drained"
title = "Drained"
run = ["lane", "list"]
wait = { until = "find(output, 'lane', lane).in_flight == 0", timeout = "5s", interval = "1s" }
'''


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def monotonic_ms(self) -> int:
        return self.now

    def wall_ms(self) -> int:
        return 1_795_982_400_000 + self.now

    def sleep_ms(self, ms: int) -> None:
        self.now += ms


class FakeNereus:
    """Answers commands from a table of functions of the call count."""

    def __init__(self, answers: dict[str, Callable[[int], tuple[int, Any]]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, args: Sequence[str], *, home: str, timeout_ms: int) -> Invocation:
        self.calls.append(tuple(args))
        key = " ".join(args[:2])
        count = sum(1 for c in self.calls if " ".join(c[:2]) == key)
        code, output = self.answers[key](count)
        return Invocation(tuple(args), home, code, output, "", 5)


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def step_started(self, planned: PlannedStep, commands: list[list[str]]) -> None:
        self.events.append(f"start {planned.step.id}")

    def item_started(self, planned: PlannedStep, item: Json, args: list[str]) -> None:
        self.events.append(f"item {planned.step.id} {' '.join(args)}")

    def item_finished(self, planned: PlannedStep, item: Json, ok: bool, detail: str) -> None:
        self.events.append(f"{'ok' if ok else 'FAIL'} {planned.step.id} {item}: {detail}")

    def waiting(self, planned: PlannedStep, polls: int, detail: str) -> None:
        self.events.append(f"wait {planned.step.id} {polls}")

    def step_finished(self, planned: PlannedStep, result: StepResult) -> None:
        self.events.append(f"{'ok' if result.ok else 'FAIL'} {planned.step.id}")


def lanes(in_flight: int) -> list[dict[str, Any]]:
    return [{"lane": "local", "in_flight": in_flight}]


def plan(text: str = TEXT, **given: str) -> Plan:
    playbook = load_playbook(text, origin="t.toml", name="t")
    return make_plan(playbook, resolve_variables(playbook, given), run_id="r1", home="/h")


def run(tmp_path: Path, nereus: FakeNereus, *, answer: Answer = "yes", yes: bool = False,
        the_plan: Plan | None = None, **resume: Any) -> tuple[Any, Recorder, FakeClock]:
    recorder, clock = Recorder(), FakeClock()
    asked: list[str] = []

    def confirm(question: str, planned: PlannedStep) -> Answer:
        asked.append(question)
        return answer

    with JournalFile(tmp_path / "t.jsonl") as journal:
        report = Runner(plan=the_plan or plan(), journal=journal, journal_path="j", source="t",
                        invoke=nereus, confirm=confirm, reporter=recorder, assume_yes=yes,
                        clock=clock, **resume).run()
    recorder.events.extend(f"asked {q}" for q in asked)
    return report, recorder, clock


def healthy(drain_after: int = 3) -> FakeNereus:
    return FakeNereus({
        "lane list": lambda n: (0, lanes(2 if n <= drain_after else 0)),
        "lane close": lambda n: (0, {"result": "APPLIED"}),
    })


def test_a_run_runs_every_step_in_order_and_journals_it(tmp_path: Path) -> None:
    """Steps run in order, the confirmation sees earlier outputs, the wait polls until its
    condition holds, and each step leaves a started and a finished line."""
    nereus = healthy()
    report, recorder, clock = run(tmp_path, nereus)
    assert report.ok and report.exit_code == 0
    assert recorder.events == [
        "start look", "ok look", "start close", "ok close", "start drained",
        "wait drained 1", "wait drained 2", "ok drained", "asked Close local (2 in flight)?"]
    assert nereus.calls[1] == ("lane", "close", "--idempotency-key=k-r1", "--", "local")
    assert report.steps[2].polls == 3 and clock.now == 1_002_000
    entries = read_journal(tmp_path / "t.jsonl")
    assert [type(e).__name__ for e in entries] == [
        "RunStarted", "StepStarted", "StepFinished", "StepStarted", "StepFinished",
        "StepStarted", "StepFinished", "RunFinished"]
    assert isinstance(entries[2], StepFinished) and entries[2].output == lanes(2)


def test_a_failed_check_stops_the_run_with_guidance(tmp_path: Path) -> None:
    """The first failing step stops the run (exit 1); its on_failure and the playbook's
    guidance are filled in; later steps are reported as not run."""
    nereus = FakeNereus({"lane list": lambda n: (0, [])})
    report, _, _ = run(tmp_path, nereus)
    assert (report.ok, report.exit_code, report.stopped_at) == (False, 1, "look")
    look = report.steps[0]
    assert "find(output, 'lane', lane) != null` is false" in look.detail
    assert look.guidance == "no lane local\ngeneral advice for local"
    assert [s.status for s in report.steps] == ["failed", "not_run", "not_run"]
    assert isinstance(read_journal(tmp_path / "t.jsonl")[-1], RunStopped)


def test_an_unexpected_exit_status_fails_with_the_commands_own_error(tmp_path: Path) -> None:
    """A command that exits outside exit_codes fails the step with its JSON error."""
    nereus = FakeNereus({"lane list": lambda n: (4, {"ok": False, "error": "engine down",
                                                     "hint": "start it"})})
    report, _, _ = run(tmp_path, nereus)
    assert report.steps[0].detail == ("`nereus lane list` exited 4: engine down (hint: start "
                                      "it)")


def test_confirmation_declined_or_impossible(tmp_path: Path) -> None:
    """'no' stops with exit 1; no terminal stops with exit 2 before the step starts; --yes
    never asks."""
    declined, _, _ = run(tmp_path, healthy(), answer="no")
    assert (declined.exit_code, declined.stop_reason, declined.stopped_at) == (1, "declined",
                                                                               "close")
    nereus = healthy()
    unasked, _, _ = run(tmp_path, nereus, answer="unavailable")
    assert (unasked.exit_code, unasked.stop_reason) == (2, "needs_confirmation")
    assert "pass --yes" in unasked.detail
    assert all(call[:2] != ("lane", "close") for call in nereus.calls)
    _, recorder, _ = run(tmp_path, healthy(), answer="no", yes=True)
    assert not [e for e in recorder.events if e.startswith("asked")]


def test_a_wait_has_a_deadline(tmp_path: Path) -> None:
    """A condition that never holds fails at the timeout with the last reason, not later."""
    report, _, clock = run(tmp_path, healthy(drain_after=10**6))
    drained = report.steps[2]
    assert drained.ok is False
    assert "still not true after 5 s (6 polls)" in drained.detail
    assert "in_flight = 2" in drained.detail
    assert clock.now == 1_005_000


def test_a_wait_ends_at_once_on_a_usage_error(tmp_path: Path) -> None:
    """Exit 2 will not get better by polling: the wait fails on the first answer."""
    nereus = healthy()
    nereus.answers["lane list"] = lambda n: (0, lanes(2)) if n == 1 else (2, None)
    report, _, _ = run(tmp_path, nereus)
    assert report.steps[2].polls == 1 and "exited 2 (usage)" in report.steps[2].detail


def test_for_each_and_continue_on_failure(tmp_path: Path) -> None:
    """A for_each step runs once per item and fails if any item fails; with
    continue_on_failure the run goes on and ends failed (exit 1) without stopping."""
    text = '''
description = "Report."

[[steps]]
id = "list"
title = "List"
run = ["shard", "list"]

[[steps]]
id = "each"
title = "Each"
for_each = "pluck(steps.list, 'shard')"
run = ["recovery-set", "verify", "{item}"]
exit_codes = [0, 1]
post = ["output.ok"]
continue_on_failure = true

[[steps]]
id = "last"
title = "Last"
run = ["doctor"]
'''
    failed = {"ok": False, "checks": [
        {"name": "members", "ok": False, "detail": "no catalogued checkpoint"},
        {"name": "objects", "ok": True, "detail": "all there"},
        {"name": "floor", "ok": False, "detail": "skipped", "skipped": True}]}
    nereus = FakeNereus({
        "shard list": lambda n: (0, [{"shard": "a/0"}, {"shard": "a/1"}]),
        "recovery-set verify": lambda n: (0, {"ok": True}) if n == 1 else (1, failed),
        "doctor": lambda n: (0, {}),
    })
    report, reporter, _ = run(tmp_path, nereus, the_plan=plan(text))
    assert (report.ok, report.exit_code, report.stopped_at) == (False, 1, None)
    each = report.steps[1]
    assert each.output == [{"ok": True}, failed]
    assert each.detail == ("[a/1] `output.ok` is false: it is false — the command says: "
                           "members: no catalogued checkpoint")
    assert [s.status for s in report.steps] == ["ok", "failed", "ok"]
    # each item is reported under its own command, so a failure names the item it was on
    assert [e for e in reporter.events if " each" in f" {e}"] == [
        "start each", "item each recovery-set verify -- a/0", "ok each a/0: ",
        "item each recovery-set verify -- a/1",
        "FAIL each a/1: `output.ok` is false: it is false — the command says: members: no "
        "catalogued checkpoint", "FAIL each"]


def test_resume_skips_completed_steps(tmp_path: Path) -> None:
    """A run stopped at the confirmation resumes there with the same run id, reusing the
    earlier outputs, and never repeats the steps that completed."""
    first, _, _ = run(tmp_path, healthy(), answer="unavailable")
    assert first.stopped_at == "close"
    the_plan = plan()
    point = resume_point(the_plan.playbook, read_journal(tmp_path / "t.jsonl"), {},
                         journal="j")
    assert point.next_index == 1
    nereus = healthy(drain_after=0)
    report, recorder, _ = run(tmp_path, nereus, yes=True, resumed=True,
                              start_index=point.next_index, outputs=dict(point.outputs),
                              finished_before=point.finished)
    assert report.ok and report.resumed
    assert report.steps[0].status == "done_before"
    assert nereus.calls[0][:2] == ("lane", "close")
    assert recorder.events[0] == "start close"
    entries = read_journal(tmp_path / "t.jsonl")
    assert [e.resumed for e in entries if isinstance(e, RunStarted)] == [False, True]
    assert isinstance(entries[-1], RunFinished)
    assert [e.step for e in entries if isinstance(e, StepStarted)] == ["look", "close",
                                                                       "drained"]


def test_the_journal_file_is_locked_and_cut_at_a_torn_tail(tmp_path: Path) -> None:
    """One run at a time per journal; a partial last line from a crash is cut before the
    next append, so lines never merge."""
    path = tmp_path / "deep" / "j.jsonl"
    with JournalFile(path) as journal:
        with pytest.raises(JournalBusy):
            JournalFile(path).open()
        journal.append(RunFinished(run_id="r", ok=True, at="t"))
    with path.open("ab") as raw:
        raw.write(b'{"event":"run_fin')
    with JournalFile(path) as journal:
        journal.append(RunFinished(run_id="s", ok=False, at="t"))
    assert [e.run_id for e in read_journal(path)] == ["r", "s"]
    assert path.read_bytes().count(b"\n") == 2


def test_command_output_must_be_one_json_document() -> None:
    """stdout is parsed as exactly one document; anything else is a named problem."""
    assert parse_output('{"a": 1}\n') == ({"a": 1}, None)
    assert parse_output("") == (None, None)
    value, problem = parse_output('{"a": 1}\n{"b": 2}\n')
    assert value is None and problem is not None and "not one JSON document" in problem


def test_a_confirmation_whose_hole_cannot_be_filled_is_asked_as_written(tmp_path: Path) -> None:
    """A null in the question must not crash the run: the operator sees the text as written."""
    nereus = FakeNereus({
        "lane list": lambda n: (0, [{"lane": "local", "in_flight": None}] if n == 1 else
                                lanes(0)),
        "lane close": lambda n: (0, {"result": "APPLIED"}),
    })
    report, recorder, _ = run(tmp_path, nereus)
    assert report.ok
    assert recorder.events[-1] == ("asked Close {lane} ({find(steps.look, 'lane', "
                                   "lane).in_flight} in flight)?")
