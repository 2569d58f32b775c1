"""How a step's ``run`` becomes the child's arguments, so that no value - a ``--var``, an
earlier step's output - can ever be read as an option.

A hole after a long option is passed joined to it (``--reason=VALUE``: Click reads all after
``=`` as the value, and the CLI's hoisting matches whole words only); the first other word
with a hole, every argument after it, and any argument starting with ``-``, go after a
``--``. So ``["lane", "close", "{lane}", "--reason", "{reason}", "--yes"]`` runs as
``lane close --reason=R --yes -- LANE``; an explicit ``--`` is honoured. Refused at load
(:func:`command_words`): a hole in the first word, short options, ``--home``/``--json``;
an option named by a hole must fill in as ``--`` and ``[A-Za-z0-9_-]``; no argument may
hold a NUL. The rules for playbook writers: ``playbooks/README.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from nereus.cli.playbook.language.expr import ExpressionError, Json
from nereus.cli.playbook.language.template import (
    Template,
    parse_template,
    render,
    render_known,
    split_at_equals,
)

OPTION_NAME = re.compile(r"^--[A-Za-z0-9][A-Za-z0-9_-]*$")
# The runner's own: `nereus --home HOME --json ...`; a step never sets them.
RUNNER_OPTIONS = frozenset({"--home", "--json"})
END_OF_OPTIONS = "--"


@dataclass(frozen=True, slots=True)
class Word:
    """One argument of the child's command line."""

    kind: Literal["command", "option", "end", "argument"]
    # command, argument: the word; option: its name (``--reason``, ``--{outcome}``)
    text: Template
    value: Template | None = None  # an option's value, passed as NAME=VALUE

    @property
    def source(self) -> str:
        """The word as the playbook wrote it."""
        return self.text.source + ("" if self.value is None else f" {self.value.source}")


_END = Word("end", parse_template(END_OF_OPTIONS))


def _prefix(word: Template) -> str:
    """The literal text a word starts with ("" when it starts with a hole)."""
    return word.parts[0] if word.parts and isinstance(word.parts[0], str) else ""


def _is_end(word: Template) -> bool:
    return word.source == END_OF_OPTIONS


def _is_long_option(word: Template) -> bool:
    return _prefix(word).startswith("--") and not _is_end(word)


def _is_short_option(word: Template) -> bool:
    prefix = _prefix(word)
    if not prefix.startswith("-") or prefix.startswith("--"):
        return False
    # "-y", "-{x}"; but "-" alone and "-5" are arguments
    return (len(prefix) == 1 and len(word.parts) > 1) or (len(prefix) > 1
                                                          and prefix[1].isalpha())


def _check_name(name: str, written: str) -> None:
    if name in RUNNER_OPTIONS:
        raise ExpressionError(f"`{written}`: {name} is the runner's own option (every step "
                              "runs as `nereus --home HOME --json ...`; use the step's home "
                              "key to run against another home)")
    if not OPTION_NAME.match(name):
        raise ExpressionError(f"`{written}` gives the option name {name!r}: expected -- and "
                              "letters, digits, - or _")


def command_words(run: Sequence[Template]) -> tuple[Word, ...]:
    """The child's command line for ``run``, as words to fill in; ExpressionError when
    ``run`` is written in a way that could let a value become an option."""
    if not run or run[0].holes or _prefix(run[0]).startswith("-"):
        first = run[0].source if run else ""
        raise ExpressionError(f"start with the command's name written out (such as `lane`), "
                              f"not `{first}`")
    head: list[Word] = []
    options: list[Word] = []
    tail: list[Word] = []
    index = 0
    after_end = False
    while index < len(run):
        word = run[index]
        index += 1
        if after_end:
            tail.append(Word("argument", word))
        elif _is_end(word):
            after_end = True
        elif _is_short_option(word):
            raise ExpressionError(f"`{word.source}`: write options in their long form "
                                  "(--name, or --name=VALUE)")
        elif _is_long_option(word):
            split = split_at_equals(word)
            if split is not None:
                name, value = split
            else:
                name, value = word, None
                following = run[index] if index < len(run) else None
                if following is not None and not (_is_long_option(following)
                                                  or _is_short_option(following)
                                                  or _is_end(following)):
                    value = following
                    index += 1
            if not name.holes:
                _check_name(name.source, word.source)
            options.append(Word("option", name, value))
        elif tail or word.holes or _prefix(word).startswith("-"):
            tail.append(Word("argument", word))
        else:
            head.append(Word("command", word))
    return (*head, *options, *((_END, *tail) if tail else ()))


def render_word(word: Word, scope: Mapping[str, Json], *, known: bool = False) -> str:
    """One word filled in (``known``: holes that need what is not known yet are shown as
    ``<expression>``, as a dry run prints them); ExpressionError when it cannot be."""
    fill = render_known if known else render
    text = fill(word.text, scope)
    if word.kind == "option":
        if word.text.holes and not (known and "<" in text):
            _check_name(text, word.text.source)
        if word.value is not None:
            text = f"{text}={fill(word.value, scope)}"
    if "\0" in text:
        raise ExpressionError(f"`{word.source}`: an argument cannot hold a NUL character")
    return text


def render_command(words: Sequence[Word], scope: Mapping[str, Json]) -> list[str]:
    """The child's arguments with every hole filled (ExpressionError if one cannot be)."""
    return [render_word(word, scope) for word in words]
