"""The playbook condition language: what it accepts, what it means, and that it never runs
anything but its own grammar (examples plus Hypothesis properties)."""

from __future__ import annotations

import contextlib
import operator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nereus.cli.playbook.language.expr import (
    ExpressionError,
    evaluate,
    explain,
    literal,
    names_used,
    parse,
    truthy,
)
from nereus.cli.playbook.language.template import parse_template, render, render_known

LANES = [{"lane": "local", "gate": "OPEN", "in_flight": 0, "due_backlog": 3},
         {"lane": "slow", "gate": "CLOSED", "in_flight": 2, "due_backlog": 0}]
SCOPE: dict[str, Any] = {
    "output": {"ok": True, "checks": [{"name": "a", "ok": True}, {"name": "b", "ok": True}],
               "members": [{"checkpoint_id": "cp-1", "applied_position": 4},
                           {"checkpoint_id": "cp-2", "applied_position": 9}],
               "shards": [], "nested": {"deep": {"value": 7}}, "none": None},
    "lanes": LANES,
    "lane": "slow",
    "keep": 3,
    "steps": {"take": {"checkpoint_id": "cp-2"}},
}


def ev(source: str, scope: dict[str, Any] | None = None) -> Any:
    return evaluate(parse(source), SCOPE if scope is None else scope)


@pytest.mark.parametrize(("source", "expected"), [
    ("len(output.shards) == 0", True),
    ("output.ok == true", True),
    ('all(output.checks, "ok")', True),
    ('any(output.checks, "missing")', False),
    ("output.members[-1].applied_position", 9),
    ("output.members[0]['checkpoint_id']", "cp-1"),
    ("output.nested.deep.value + 1 - 3", 5),
    ('find(lanes, "lane", lane).in_flight == 2', True),
    ('find(lanes, "lane", "nope") == null', True),
    ('len(where(lanes, "gate", "OPEN"))', 1),
    ('pluck(lanes, "lane")', ["local", "slow"]),
    ('"local" in pluck(lanes, "lane")', True),
    ('steps.take.checkpoint_id not in pluck(output.members, "checkpoint_id")', False),
    ('"ok" in output', True),
    ('"lo" in "local"', True),
    ("not output.none", True),
    ("keep >= 3 and keep < 4", True),
    ("keep > 5 or output.ok", True),
    ("[1, 2] == [1, 2.0]", True),
    ("true == 1", False),
    ("-keep", -3),
    ("'it\\'s' == \"it's\"", True),
    ("(keep == 3) == true", True),
    ("all(output.members)", True),
    ("any([])", False),
])
def test_examples(source: str, expected: Any) -> None:
    """The documented forms evaluate as the grammar in the module docstring says."""
    assert ev(source) == expected


@pytest.mark.parametrize(("source", "words"), [
    ("output.missing == 1", "no key 'missing' in output"),
    ("output.members[5]", "index 5 is out of range"),
    ("output.ok < 3", "cannot order a boolean and a number"),
    ("len(keep)", "len() of a number"),
    ("nothing == 1", "unknown name 'nothing'"),
    ('all(output, "x")', "needs a list"),
    ("output.none.x", "is a null"),
    ("3 in keep", "cannot look for a number in a number"),
])
def test_evaluation_errors_name_the_path(source: str, words: str) -> None:
    """A typo or a wrong shape fails loudly, naming the sub-expression, not as null."""
    with pytest.raises(ExpressionError, match=words.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        ev(source)


@pytest.mark.parametrize(("source", "words"), [
    ("output.ok = true", "unexpected character '='"),
    ("output.ok && true", "use and / or / not"),
    ("a == b == c", "do not chain"),
    ("open(x)", "unknown function open()"),
    ("len(a, b)", "takes 1 argument"),
    ("'unterminated", "unterminated string"),
    ("", "empty expression"),
    ("output.", "expected a key name"),
    ("x[1", "expected ']'"),
    ("__import__('os')", "unknown function"),
    ("output.__class__", None),  # parses: a key lookup in JSON, never a Python attribute
])
def test_syntax_errors_name_the_column(source: str, words: str | None) -> None:
    """Bad syntax is an ExpressionError with the column; nothing is evaluated."""
    if words is None:
        with pytest.raises(ExpressionError, match="no key '__class__'"):
            ev(source)
        return
    with pytest.raises(ExpressionError, match=words.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        parse(source)


def test_explain_shows_the_values_compared() -> None:
    """A false condition is explained with the values it looked at."""
    expression = parse('find(lanes, "lane", lane).in_flight == 0 and keep == 3')
    assert explain(expression, SCOPE) == ('`find(lanes, "lane", lane).in_flight == 0` is '
                                          'false: find(lanes, "lane", lane).in_flight = 2')
    assert "output.ok = true" in explain(parse("not output.ok"), SCOPE)


def test_names_used_lists_roots_and_the_first_key() -> None:
    """Loading a playbook checks references with this: steps.ID and plain names."""
    found = set(names_used(parse('steps.take.x == lane and len(steps["verify"]) > keep')))
    assert found == {("steps", "take"), ("lane", None), ("steps", "verify"), ("keep", None)}


def test_templates_fill_holes_and_keep_escaped_braces() -> None:
    """Holes become text; {{ and }} are literal braces; null is refused."""
    template = parse_template("verify {steps.take.checkpoint_id} --keep={keep} {{x}}")
    assert render(template, SCOPE) == "verify cp-2 --keep=3 {x}"
    assert render(parse_template("{output.ok}/{output.members[0]}"), SCOPE) == (
        'true/{"applied_position":4,"checkpoint_id":"cp-1"}')
    assert render_known(template, {"keep": 3}) == (
        "verify <steps.take.checkpoint_id> --keep=3 {x}")
    with pytest.raises(ExpressionError, match="is null"):
        render(parse_template("{output.none}"), SCOPE)
    for bad in ("{unclosed", "a } b", "{len(}"):
        with pytest.raises(ExpressionError):
            parse_template(bad)


# -- properties ----------------------------------------------------------------------------------

json_scalars = (st.none() | st.booleans() | st.integers(-10**12, 10**12)
                | st.floats(allow_nan=False, allow_infinity=False, width=32).map(
                    lambda f: float(f"{f:.3f}")) | st.text(max_size=12))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), inner,
                      max_size=4),
    max_leaves=12)
literal_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4),
                              max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_a_value_equals_itself_and_its_literal(value: Any) -> None:
    """`output == output` always holds, and a written literal reads back equal."""
    assert ev("output == output", {"output": value}) is True
    assert ev("output != output", {"output": value}) is False
    if not isinstance(value, dict) and not _has_dict(value):
        assert ev(f"output == {literal(value)}", {"output": value}) is True


def _has_dict(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and any(map(_has_dict, value)))


@settings(max_examples=200, deadline=None)
@given(st.integers(-10**9, 10**9), st.integers(-10**9, 10**9),
       st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
def test_integer_comparisons_match_python(a: int, b: int, op: str) -> None:
    """Comparisons of numbers mean what they mean in arithmetic."""
    python = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
              ">": operator.gt, ">=": operator.ge}[op]
    assert ev(f"a {op} b", {"a": a, "b": b}) is python(a, b)
    assert ev(f"not (a {op} b)", {"a": a, "b": b}) is (not python(a, b))


@settings(max_examples=200, deadline=None)
@given(json_values, json_values)
def test_and_or_follow_truthiness(a: Any, b: Any) -> None:
    """and/or/not are boolean operators over JSON truthiness."""
    scope = {"a": a, "b": b}
    assert ev("a and b", scope) is (truthy(a) and truthy(b))
    assert ev("a or b", scope) is (truthy(a) or truthy(b))
    assert ev("not a", scope) is (not truthy(a))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"ok": st.booleans(), "n": st.integers(0, 5)}),
                max_size=6), st.integers(0, 5))
def test_list_functions_agree_with_comprehensions(items: list[dict[str, Any]], n: int) -> None:
    """all/any/pluck/find/where/len agree with the obvious Python over the same list."""
    scope = {"xs": items, "n": n}
    assert ev('all(xs, "ok")', scope) is all(i["ok"] for i in items)
    assert ev('any(xs, "ok")', scope) is any(i["ok"] for i in items)
    assert ev('pluck(xs, "n")', scope) == [i["n"] for i in items]
    assert ev('where(xs, "n", n)', scope) == [i for i in items if i["n"] == n]
    assert ev('find(xs, "n", n)', scope) == next((i for i in items if i["n"] == n), None)
    assert ev("len(xs)", scope) == len(items)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=40))
def test_arbitrary_text_parses_or_raises_expression_error(text: str) -> None:
    """Whatever an operator writes, parsing ends in a tree or an ExpressionError, and
    evaluating a tree over an empty scope ends in a value or an ExpressionError."""
    try:
        expression = parse(text)
    except ExpressionError:
        return
    with contextlib.suppress(ExpressionError):
        evaluate(expression, {})
