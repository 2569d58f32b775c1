"""The run journal: what a line holds, and where a resumed run continues.

A run appends one fsynced JSON line per event to ``<home>/playbooks/journal/<name>.jsonl``
(a line that is there happened): ``run_started``, ``step_started`` (the exact arguments),
``step_finished`` (verdicts, exit code, the JSON output later steps may use),
``run_stopped`` and ``run_finished``. ``--resume`` continues the *last* run of the file with
its run id (so idempotency keys built from ``{run_id}`` repeat), its variables and its
completed steps' outputs, from the first step it did not complete; a step that started and
never finished runs again (``playbooks/README.md``, "The journal and --resume").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from nereus.cli.playbook.language.documents import CheckResult, VariableValue
from nereus.cli.playbook.language.expr import Json, equal, show
from nereus.cli.playbook.language.model import Playbook
from nereus.cli.playbook.language.plan import check_variable_names, convert
from nereus.errors import UsageError

JOURNAL_VERSION = 1


class RunStarted(msgspec.Struct, frozen=True, tag="run_started", tag_field="event"):
    run_id: str
    playbook: str
    source: str  # where the playbook was read from
    step_ids: list[str]
    variables: dict[str, VariableValue]
    resumed: bool
    at: str
    version: int = JOURNAL_VERSION


class StepStarted(msgspec.Struct, frozen=True, tag="step_started", tag_field="event"):
    run_id: str
    step: str
    index: int
    args: list[str]  # for a for_each step: the first item's (all are in step_finished)
    home: str
    at: str


class StepFinished(msgspec.Struct, frozen=True, tag="step_finished", tag_field="event"):
    run_id: str
    step: str
    index: int
    ok: bool
    advance: bool  # the run went on after it (ok, or failed with continue_on_failure)
    exit_code: int | None
    output: Json  # the command's JSON output (a list of them for a for_each step)
    checks: list[CheckResult]
    detail: str
    at: str
    polls: int = 1


class RunStopped(msgspec.Struct, frozen=True, tag="run_stopped", tag_field="event"):
    run_id: str
    step: str | None
    reason: str  # failed | declined | needs_confirmation | interrupted | error
    exit_code: int
    detail: str
    at: str


class RunFinished(msgspec.Struct, frozen=True, tag="run_finished", tag_field="event"):
    run_id: str
    ok: bool
    at: str


Entry = RunStarted | StepStarted | StepFinished | RunStopped | RunFinished
_DECODER = msgspec.json.Decoder(Entry)


def encode_entry(entry: Entry) -> bytes:
    """One journal line, newline included."""
    return msgspec.json.encode(entry) + b"\n"


class JournalDamaged(UsageError):
    """A journal line before the last one cannot be read: resuming would guess."""


def decode_entries(data: bytes, *, origin: str) -> list[Entry]:
    """The entries of a journal file. A torn last line (a write cut by a crash, with no
    newline) is left out; a damaged line anywhere else is an error naming it."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        lines.pop()  # no newline at the end: the last write never completed
    out: list[Entry] = []
    for number, line in enumerate(lines, start=1):
        try:
            out.append(_DECODER.decode(line))
        except msgspec.DecodeError as exc:
            raise JournalDamaged(f"{origin}:{number}: not a journal line ({exc})",
                                 hint="move the journal aside and start a new run without "
                                 "--resume") from None
    return out


def last_run(entries: Sequence[Entry]) -> list[Entry]:
    """The entries of the last run in the file, from its first ``run_started`` on (a
    resumed run writes another ``run_started`` with ``resumed`` true and the same run id;
    that continues the run, it does not begin a new one)."""
    starts = [i for i, e in enumerate(entries) if isinstance(e, RunStarted) and not e.resumed]
    return list(entries[starts[-1]:]) if starts else []


@dataclass(frozen=True, slots=True)
class Resume:
    """Where a resumed run continues."""

    run_id: str
    variables: dict[str, Json]
    next_index: int  # the first step to run
    outputs: dict[str, Json] = field(default_factory=dict)  # of the completed steps
    finished: dict[str, StepFinished] = field(default_factory=dict)


class ResumeRefused(UsageError):
    """``--resume`` cannot continue: nothing to continue, or not the same run."""


def unfinished(entries: Sequence[Entry]) -> RunStarted | None:
    """The last run if it neither finished nor is empty, else None."""
    run = last_run(entries)
    if not run or isinstance(run[-1], RunFinished):
        return None
    first = run[0]
    assert isinstance(first, RunStarted)
    return first


def resume_point(playbook: Playbook, entries: Sequence[Entry], given: Mapping[str, str],
                 *, journal: str) -> Resume:
    """Where ``--resume`` continues the last run of ``entries``, with ``given`` variables
    (each must equal the journal's; the journal's fill in the rest). ResumeRefused with a
    message saying why not."""
    check_variable_names(playbook, given)  # a mistyped --var first: it is what to fix
    run = last_run(entries)
    if not run:
        raise ResumeRefused(f"no run of playbook {playbook.name} to resume in {journal}",
                            hint="start one without --resume")
    started = run[0]
    assert isinstance(started, RunStarted)
    if isinstance(run[-1], RunFinished):
        verdict = "ok" if run[-1].ok else "with failures"
        raise ResumeRefused(
            f"the last run of {playbook.name} ({started.run_id}) finished {verdict} at "
            f"{run[-1].at}: there is nothing to resume",
            hint="start a new run without --resume")
    if started.playbook != playbook.name:
        raise ResumeRefused(f"{journal} holds a run of {started.playbook}, not {playbook.name}")
    if tuple(started.step_ids) != playbook.step_ids:
        raise ResumeRefused(
            f"the steps of {playbook.name} changed since run {started.run_id} began "
            f"(then: {', '.join(started.step_ids)}; now: {', '.join(playbook.step_ids)})",
            hint="start a new run without --resume")
    differences = []
    for name, raw in sorted(given.items()):
        variable = playbook.variable(name)
        if variable is None:
            continue  # not reached: check_variable_names refused it
        value = convert(variable, raw)
        if name in started.variables and not equal(value, started.variables[name]):
            differences.append(f"{name}={show(value)} (the run has {name}="
                               f"{show(started.variables[name])})")
    if differences:
        raise ResumeRefused(
            f"--resume continues run {started.run_id} of {playbook.name} with its own "
            f"variables; these differ: {'; '.join(differences)}",
            hint="leave the --var out (the journal's values are used), or start a new run "
            "without --resume")
    finished = {e.step: e for e in run if isinstance(e, StepFinished)}
    next_index = 0
    outputs: dict[str, Json] = {}
    for step_id in playbook.step_ids:
        done = finished.get(step_id)
        if done is None or not done.advance:
            break
        outputs[step_id] = done.output
        next_index += 1
    return Resume(run_id=started.run_id, variables=dict(started.variables),
                  next_index=next_index, outputs=outputs,
                  finished={k: v for k, v in finished.items() if k in outputs})
