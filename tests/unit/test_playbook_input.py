"""Playbooks are robust to their input: expressions too long or too deep are refused when
they are parsed (a usage error naming file, step, field and limit, never RecursionError),
and no value - a ``--var`` or a step's output - can become an option of the child command.

The module imports only names that existed before these bounds, so on older code each test
fails on its behaviour rather than on an import."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from nereus.cli.edge import hoist_global_options as _hoist_global_options
from nereus.cli.playbook.language import parser
from nereus.cli.playbook.language.expr import ExpressionError, evaluate, explain, parse
from nereus.cli.playbook.language.load import PlaybookError, load_playbook
from nereus.cli.playbook.language.model import Playbook
from nereus.cli.playbook.language.plan import make_plan, render_args, resolve_variables
from nereus.cli.playbook.language.tree import depth
from nereus.errors import NereusError, UsageError

SCOPE: dict[str, Any] = {"a": {"b": [1, {"c": True}]}, "xs": [1, 2, 3], "s": "text", "n": 2}
# an opening with its closing; each adds at least one level of nesting
NESTINGS = [("(", ")"), ("[", "]"), ("not ", ""), ("-", ""), ("len(", ")"), ("a[", "]"),
            ("all(", ")"), ("[1, ", "]"), ("find(xs, ", ", 1)"), ("(n + ", ")")]


def playbook(condition: str = "true", run: str = '["lane", "list"]') -> str:
    return (f'description = "Input test."\n\n[vars.v]\ndescription = "a value"\ndefault = "x"\n'
            f'\n[[steps]]\nid = "check"\ntitle = "Check"\nrun = {run}\n'
            f"post = [{_toml_string(condition)}]\n")


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def load(text: str) -> Playbook:
    return load_playbook(text, origin="deep.toml", name="deep")


@contextmanager
def stack_headroom(frames: int) -> Iterator[None]:
    """Lower the recursion limit to what the caller uses now plus ``frames``."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# -- bounds --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("opening", "closing"), NESTINGS)
def test_nesting_deeper_than_the_limit_is_a_usage_error(opening: str, closing: str) -> None:
    """150 levels of any kind of nesting: an ExpressionError (a UsageError, exit 2) saying
    how deep and what the limit is, not a RecursionError."""
    with pytest.raises(ExpressionError) as caught:
        parse(opening * 150 + "n" + closing * 150)
    assert isinstance(caught.value, UsageError)
    assert f"deep, the limit is {parser.MAX_EXPRESSION_DEPTH}" in caught.value.message
    assert len(caught.value.message) < 400  # quotes a bit of the expression, not all of it


def test_the_message_says_how_deep() -> None:
    """Brackets are counted before parsing, so the message has the real depth."""
    with pytest.raises(ExpressionError, match="nested 150 deep, the limit is 32"):
        parse("(" * 150 + "1" + ")" * 150)


def test_long_chains_count_as_depth_and_long_text_as_size() -> None:
    """`a and a and ...` builds a tree as deep as the chain (what the evaluator walks), and
    text beyond the size limit is refused before it is even tokenized."""
    with pytest.raises(ExpressionError, match="nested 34 deep, the limit is 32"):
        parse(" and ".join(["n"] * 34))
    with pytest.raises(ExpressionError,
                       match="expression is 20000 characters, the limit is 4096"):
        parse("n" * 20000)
    limit, chars = parser.MAX_EXPRESSION_DEPTH, parser.MAX_EXPRESSION_CHARS
    assert (limit, chars) == (32, 4096)  # as the messages above and playbooks/README.md say
    parse(" and ".join(["n"] * (limit - 1)))
    parse("1" + " " * (chars - 1))


def test_the_deepest_accepted_expression_evaluates_in_a_few_frames_per_level() -> None:
    """The parse-time bound is what keeps the recursive evaluator bounded: the deepest
    expression it accepts parses, evaluates and is explained within 300 frames."""
    for opening, closing in NESTINGS:
        levels = 1
        while levels < 500:
            try:
                parse(opening * (levels + 1) + "n" + closing * (levels + 1))
            except ExpressionError:
                break
            levels += 1
        source = opening * levels + "n" + closing * levels
        with stack_headroom(300):
            expression = parse(source)
            with suppress(ExpressionError):
                evaluate(expression, SCOPE)
            explain(expression, SCOPE)
        assert levels < 500
        assert depth(expression.root)[0] <= parser.MAX_EXPRESSION_DEPTH


def test_a_playbook_names_the_file_step_and_field_of_a_deep_condition() -> None:
    """Loading reports where the expression is and the limit, as a PlaybookError."""
    with pytest.raises(PlaybookError) as caught:
        load(playbook("(" * 150 + "true" + ")" * 150))
    message = caught.value.message
    assert message.startswith("deep.toml:")
    assert "step 'check': post: expression nested 150 deep, the limit is 32" in message
    with pytest.raises(PlaybookError, match=r"step 'check': run: in .*is 5000 characters"):
        load(playbook(run='["lane", "list", "{' + "n" * 5000 + '}"]'))


def test_deeply_nested_toml_is_a_playbook_error() -> None:
    """tomllib recurses into arrays; a file nested beyond that is refused, not a crash."""
    with pytest.raises(PlaybookError, match="nested too deeply"):
        load("description = 'x'\nsteps = " + "[" * 5000 + "]" * 5000 + "\n")


PIECES = ["(", ")", "[", "]", "not ", "-", " + ", " and ", " or ", "len(", "all(", "a", "a.b",
          "xs", "1", '"s"', ", ", ".", " == ", " in ", "a[", "true", "null", "n", "find("]


@settings(max_examples=150, deadline=None)
@given(st.one_of(
    st.tuples(st.sampled_from(NESTINGS), st.integers(0, 3000),
              st.sampled_from(["n", "a.b", "xs", "1", '"s"', "("])).map(
        lambda t: t[0][0] * t[1] + t[2] + t[0][1] * t[1]),
    st.lists(st.sampled_from(PIECES), max_size=2500).map("".join),
    st.lists(st.sampled_from(PIECES), max_size=40).map(lambda ps: "".join(ps) * 200),
))
@pytest.mark.timeout(240)
def test_random_deep_or_long_expressions_raise_only_nereus_errors(source: str) -> None:
    """Whatever the nesting or length, parsing, evaluating, explaining and loading end in a
    value or one of the project's errors (exit 2 for a playbook), never anything else."""
    try:
        expression = parse(source)
    except NereusError:
        pass
    else:
        with suppress(NereusError):
            evaluate(expression, SCOPE)
        explain(expression, SCOPE)
    with suppress(PlaybookError):
        load(playbook(source))


# -- values never become options ----------------------------------------------------------------

CLOSE = '''
description = "Values stay values."

[vars.lane]
description = "the lane"

[vars.reason]
description = "why"

[[steps]]
id = "close"
title = "Close"
run = ["lane", "close", "{lane}", "--reason", "{reason}", "--idempotency-key", "k-{run_id}",
       "--yes"]
post = ["true"]
'''


def close_argv(**values: str) -> list[str]:
    pb = load_playbook(CLOSE, origin="t.toml", name="t")
    plan = make_plan(pb, resolve_variables(pb, values), run_id="r1", home="/h")
    return render_args(pb.steps[0], plan.scope({}))


def test_values_go_after_double_dash_or_joined_to_their_option() -> None:
    """A positional value goes after `--`, an option's value is joined with `=`, so the
    CLI's hoisting of --home/--json and Click see values, not options."""
    argv = close_argv(lane="--home=/elsewhere", reason="--json")
    assert argv == ["lane", "close", "--reason=--json", "--idempotency-key=k-r1", "--yes",
                    "--", "--home=/elsewhere"]
    line = ["--home=/h", "--json", *argv]
    assert _hoist_global_options(line) == line


_HOSTILE = st.one_of(st.sampled_from(["--home", "--home=/elsewhere", "--json", "--", "-y",
                                      "--yes", "--help", "-", ""]),
                     st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\0"),
                             max_size=20))


@settings(max_examples=200, deadline=None)
@given(lane=_HOSTILE, reason=_HOSTILE)
def test_any_value_reaches_the_command_as_the_value(lane: str, reason: str) -> None:
    """Parsed the way the CLI parses (hoisting, then Click through Typer), the command gets
    exactly the values given and the runner's own --home/--json, whatever the values are."""
    seen: dict[str, Any] = {}
    app = typer.Typer()

    @app.callback()
    def main(home: str = typer.Option(...), json: bool = typer.Option(False, "--json"),
             ) -> None:
        seen["home"], seen["json"] = home, json

    @app.command()
    def close(lane: str, reason: str = typer.Option(...),
              idempotency_key: str = typer.Option(...),
              yes: bool = typer.Option(False, "--yes")) -> None:
        seen.update(lane=lane, reason=reason, key=idempotency_key, yes=yes)

    argv = close_argv(lane=lane, reason=reason)[1:]  # this app's `close` is at the top
    typer.main.get_command(app).main(
        args=_hoist_global_options(["--home=/h", "--json", *argv]), standalone_mode=False)
    assert seen == {"home": "/h", "json": True, "lane": lane, "reason": reason, "key": "k-r1",
                    "yes": True}


@pytest.mark.parametrize(("run", "words"), [
    ('["lane", "close", "{v}", "-y"]', "run: `-y`: write options in their long form"),
    ('["{v}", "list"]', "run: start with the command's name written out"),
    ('["lane", "list", "--json"]', "--json is the runner's own option"),
    ('["lane", "list", "--home", "{v}"]', "--home is the runner's own option"),
    ('["lane", "list", "--home={v}"]', "--home is the runner's own option"),
])
def test_runs_that_could_turn_a_value_into_an_option_are_refused(run: str, words: str) -> None:
    """Short options, a hole as the command, the runner's --home/--json: refused when the
    playbook is loaded, naming the step and the field."""
    with pytest.raises(PlaybookError) as caught:
        load(playbook(run=run))
    assert "step 'check': " in caught.value.message and words in caught.value.message


@pytest.mark.parametrize(("run", "value", "words"), [
    ('["lane", "list", "--{v}"]', "home=/elsewhere", "gives the option name '--home=/elsewhere'"),
    ('["lane", "list", "--{v}"]', "home", "--home is the runner's own option"),
    ('["lane", "list", "--{v}"]', "json", "--json is the runner's own option"),
    ('["checkpoint", "verify", "{v}"]', "x\0y", "cannot hold a NUL"),
])
def test_an_option_named_by_a_hole_is_checked_when_filled_in(run: str, value: str,
                                                               words: str) -> None:
    """`--{v}` must fill in as an option name, and never as --home or --json; no argument
    may hold a NUL (which the child's argv cannot carry)."""
    pb = load(playbook(run=run))
    plan = make_plan(pb, resolve_variables(pb, {"v": value}), run_id="r1", home="/h")
    with pytest.raises(ExpressionError, match=words):
        render_args(pb.steps[0], plan.scope({}))


def test_a_mistyped_var_is_named_with_a_guess() -> None:
    """--var must name a declared variable; a near miss says which one was meant."""
    pb = load_playbook(CLOSE, origin="t.toml", name="t")
    with pytest.raises(UsageError) as caught:
        resolve_variables(pb, {"lane": "a", "reason": "b", "reasn": "c"})
    assert "has no variable(s) reasn (did you mean reasn -> reason?)" in caught.value.message
    assert caught.value.hint is not None and "its variables: lane, reason" in caught.value.hint
