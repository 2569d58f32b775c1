"""Planning (variables -> a resolved plan), judging checks, and the journal's resume logic:
the pure half of playbooks."""

from __future__ import annotations

from typing import Any

import pytest

from nereus.cli.playbook.language.documents import PlannedWait
from nereus.cli.playbook.language.expr import parse
from nereus.cli.playbook.language.journal import (
    Entry,
    JournalDamaged,
    ResumeRefused,
    RunFinished,
    RunStarted,
    RunStopped,
    StepFinished,
    StepStarted,
    decode_entries,
    encode_entry,
    resume_point,
    unfinished,
)
from nereus.cli.playbook.language.load import load_playbook
from nereus.cli.playbook.language.model import Playbook
from nereus.cli.playbook.language.plan import (
    describe_step,
    judge,
    make_plan,
    parse_assignments,
    resolve_variables,
)
from nereus.errors import UsageError

TEXT = '''
description = "Plan test."

[vars.shard]
description = "the shard"
default = "default/0"

[vars.keep]
description = "how many"
type = "int"
default = 3

[vars.outcome]
description = "what happened"
choices = ["published", "not-published"]

[vars.timeout]
description = "how long"
type = "duration"
default = "2m"

[[steps]]
id = "take"
title = "Take"
run = ["checkpoint", "create", "{shard}"]
post = ["output.checkpoint_id != null"]

[[steps]]
id = "verify"
title = "Verify"
confirm = "Verify {steps.take.checkpoint_id} of {shard}?"
run = ["checkpoint", "verify", "{steps.take.checkpoint_id}", "--{outcome}"]
wait = { until = "output.ok", timeout = "{timeout}", interval = "500ms" }

[[steps]]
id = "each"
title = "Each"
for_each = "[1, 2]"
run = ["x", "{item}", "--keep", "{keep}"]
post = ["output.ok"]
'''


def playbook() -> Playbook:
    return load_playbook(TEXT, origin="p.toml", name="p")


def test_variables_take_defaults_types_and_choices() -> None:
    """Given values win over defaults, ints become ints, choices and durations are checked."""
    values = resolve_variables(playbook(), {"outcome": "published", "keep": "5"})
    assert values == {"shard": "default/0", "keep": 5, "outcome": "published",
                      "timeout": "2m"}
    for given, words in [({}, r"needs variable\(s\): outcome \(what happened\)"),
                         ({"outcome": "maybe"}, "'maybe' is not one of published, "
                          "not-published"),
                         ({"outcome": "published", "keep": "x"}, "not an integer"),
                         ({"outcome": "published", "timeout": "soon"}, "not a duration"),
                         ({"outcome": "published", "colour": "red"}, r"no variable\(s\) colour")]:
        with pytest.raises(UsageError, match=words):
            resolve_variables(playbook(), given)


def test_assignments_are_name_equals_value() -> None:
    """--var K=V keeps everything after the first '='; malformed or repeated ones are refused."""
    assert parse_assignments(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    for bad in (["novalue"], ["=v"], ["a=1", "a=2"]):
        with pytest.raises(UsageError):
            parse_assignments(bad)


def test_the_plan_resolves_what_variables_decide() -> None:
    """Durations become milliseconds; later steps' outputs stay visible holes in a dry run."""
    pb = playbook()
    plan = make_plan(pb, resolve_variables(pb, {"outcome": "not-published"}), run_id="r1",
                     home="/h")
    verify = plan.steps[1]
    assert (verify.wait_timeout_ms, verify.wait_interval_ms) == (120_000, 500)
    assert verify.timeout_ms == 600_000 and verify.home == "/h"
    shown = describe_step(plan, verify)
    assert shown.run == ["checkpoint", "verify", "--not-published", "--",
                         "<steps.take.checkpoint_id>"]
    assert shown.confirm == "Verify <steps.take.checkpoint_id> of default/0?"
    assert shown.wait == PlannedWait(until="output.ok", timeout_ms=120_000, interval_ms=500)
    assert describe_step(plan, plan.steps[2]).for_each == "[1, 2]"


def test_judge_stops_at_the_first_false_condition() -> None:
    """Later conditions usually build on earlier ones, so the first failure is the verdict."""
    conditions = [parse("output.running"), parse('all(output.shards, "caught_up")')]
    results = judge(conditions, {"output": {"running": False}})
    assert [(r.ok, r.detail) for r in results] == [
        (False, "`output.running` is false: it is false")]
    results = judge(conditions, {"output": {"running": True, "shards": [{"caught_up": 1}]}})
    assert [r.ok for r in results] == [True, True]
    (broken,) = judge([parse("output.nope == 1")], {"output": {}})
    assert not broken.ok and "no key 'nope'" in broken.detail


# -- the journal --------------------------------------------------------------------------------

AT = "2026-11-29T20:00:00.000Z"


def started(run_id: str = "r1", *, resumed: bool = False, **variables: Any) -> RunStarted:
    return RunStarted(run_id=run_id, playbook="p", source="p.toml",
                      step_ids=["take", "verify", "each"],
                      variables={"shard": "default/0", "keep": 3, "outcome": "published",
                                 "timeout": "2m", **variables}, resumed=resumed, at=AT)


def finished(step: str, index: int, *, ok: bool = True, advance: bool | None = None,
             output: Any = None, run_id: str = "r1") -> StepFinished:
    return StepFinished(run_id=run_id, step=step, index=index, ok=ok,
                        advance=ok if advance is None else advance, exit_code=0 if ok else 1,
                        output=output, checks=[], detail="", at=AT)


def test_journal_lines_round_trip_and_a_torn_tail_is_left_out() -> None:
    """Each entry is one line; a crash mid-write leaves a partial last line that is ignored,
    while damage before the end is refused (resuming would guess)."""
    entries: list[Entry] = [
        started(), StepStarted(run_id="r1", step="take", index=0, args=["a"], home="/h", at=AT),
        finished("take", 0, output={"checkpoint_id": "c"})]
    data = b"".join(encode_entry(e) for e in entries)
    assert decode_entries(data, origin="j") == entries
    assert decode_entries(data + b'{"event":"step_st', origin="j") == entries
    with pytest.raises(JournalDamaged, match="j:2: not a journal line"):
        decode_entries(encode_entry(entries[0]) + b"garbage\n" + encode_entry(entries[2]),
                       origin="j")


def test_resume_continues_after_the_last_completed_step() -> None:
    """Completed steps keep their outputs; a step that started but never finished runs again."""
    entries: list[Entry] = [started(), finished("take", 0, output={"checkpoint_id": "c"}),
               StepStarted(run_id="r1", step="verify", index=1, args=[], home="/h", at=AT)]
    point = resume_point(playbook(), entries, {}, journal="j")
    assert (point.run_id, point.next_index) == ("r1", 1)
    assert point.outputs == {"take": {"checkpoint_id": "c"}}
    assert point.variables["keep"] == 3


def test_a_failed_step_is_run_again_unless_the_run_went_past_it() -> None:
    """advance (ok, or failed with continue_on_failure) is what lets resume skip a step."""
    stopped = RunStopped(run_id="r1", step="verify", reason="failed", exit_code=1, detail="",
                         at=AT)
    failed: list[Entry] = [started(), finished("take", 0), finished("verify", 1, ok=False),
                           stopped]
    assert resume_point(playbook(), failed, {}, journal="j").next_index == 1
    went_on: list[Entry] = [started(), finished("take", 0),
                            finished("verify", 1, ok=False, advance=True), stopped]
    assert resume_point(playbook(), went_on, {}, journal="j").next_index == 2


def test_a_resumed_run_is_one_run_with_the_earlier_attempts() -> None:
    """The second run_started (resumed) continues the run: steps done in either count."""
    entries: list[Entry] = [
               started(), finished("take", 0),
               RunStopped(run_id="r1", step="verify", reason="needs_confirmation",
                          exit_code=2, detail="", at=AT),
               started(resumed=True), finished("verify", 1)]
    point = resume_point(playbook(), entries, {}, journal="j")
    assert point.next_index == 2
    last = unfinished(entries)
    assert last is not None and last.run_id == "r1"


def test_resume_refuses_what_it_cannot_continue() -> None:
    """No run, a finished run, other variables or other steps: refused with the reason."""
    pb = playbook()
    with pytest.raises(ResumeRefused, match="no run of playbook p to resume"):
        resume_point(pb, [], {}, journal="j")
    done: list[Entry] = [started(), finished("take", 0), RunFinished(run_id="r1", ok=True, at=AT)]
    with pytest.raises(ResumeRefused, match=r"finished ok .* nothing to resume"):
        resume_point(pb, done, {}, journal="j")
    assert unfinished(done) is None
    with pytest.raises(ResumeRefused, match=r'these differ: shard="default/1" \(the run has '
                       r'shard="default/0"\)'):
        resume_point(pb, [started()], {"shard": "default/1"}, journal="j")
    assert resume_point(pb, [started()], {"keep": "3"}, journal="j").next_index == 0
    other = RunStarted(run_id="r1", playbook="p", source="p.toml", step_ids=["take", "gone"],
                       variables={}, resumed=False, at=AT)
    with pytest.raises(ResumeRefused, match="the steps of p changed"):
        resume_point(pb, [other], {}, journal="j")
