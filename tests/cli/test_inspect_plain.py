"""``shard inspect``'s plain renderer (``cli/shard_offline._plain``, used through a pipe and
on a terminal so Rich is not imported) prints exactly what its Rich renderer prints there,
in every form Rich would print in (styled or not, any width), or declines."""

from __future__ import annotations

import copy
import io
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from nereus.cli.output import PIPED_WIDTH, TextForm, controls_escaped, terminal_safe
from nereus.cli.shard_offline import _draw, _plain, _view
from nereus.inspection import (
    ActivationReport,
    DbReport,
    DiskReport,
    LaneReport,
    RetainedItem,
    ShardReport,
)
from nereus.records.vocabulary import MessageState

LANE_NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", fullmatch=True)
TIMES = st.one_of(st.none(), st.sampled_from(["2026-01-01T00:00:01.007Z",
                                              "2030-12-31T23:59:59.999Z"]))
# paths an operator may give --db: plain, with markup, emoji codes, controls, non-ASCII
PATHS = st.one_of(st.from_regex(r"/[a-z0-9/._-]{1,40}", fullmatch=True),
                  st.text(min_size=1, max_size=40),
                  st.sampled_from(["/tmp/[red]x[/red]", "/tmp/a:smile:b", "/x\\", "/é/ü",
                                   "/tmp/\x1b[31mred", "/tmp/a:100:b", "/tmp/12:30:00"]))
COUNTS = st.integers(min_value=0, max_value=10**12)


@st.composite
def reports(draw: st.DrawFn) -> dict[str, Any]:
    """A ``shard inspect`` document as the command prints it (``msgspec.to_builtins``)."""
    states = {s.value: draw(COUNTS) for s in MessageState}
    lanes = [LaneReport(lane=draw(LANE_NAMES), gate=draw(st.sampled_from(["OPEN", "CLOSED"])),
                        messages_by_state=states, open_attempts=draw(COUNTS),
                        admissions=draw(COUNTS), next_due_ms=None, capacity=None,
                        retry_max=5, ordered=False, next_due=draw(TIMES))
             for _ in range(draw(st.integers(0, 4)))]
    oldest = draw(st.one_of(st.none(), st.builds(
        RetainedItem, kind=st.sampled_from(["message", "result"]),
        id=st.text(min_size=1, max_size=20), expire_at_ms=st.just(0), expire_at=TIMES.filter(
            lambda t: t is not None))))
    report = ShardReport(
        shard="default/0", route="default", partition=0, schema_version=1,
        applied_position=draw(st.one_of(st.none(), COUNTS)), records_applied=draw(COUNTS),
        messages_by_state=states, open_obligations=draw(COUNTS), timeline_head_ms=None,
        paused=draw(st.booleans()), activation=draw(st.one_of(st.none(), st.just(
            ActivationReport(owner_id="o", fencing_epoch=1, position=2)))),
        lanes=lanes, timeline_head=draw(TIMES), log_end_position=None,
        lag=draw(st.one_of(st.none(), COUNTS)),
        db=DbReport(path=draw(PATHS), estimated_keys=None, live_data_bytes=None),
        disk=DiskReport(live_bytes=draw(st.one_of(st.none(), COUNTS)), sst_bytes=draw(COUNTS),
                        wal_bytes=draw(COUNTS), obsolete_bytes=None,
                        terminal_messages=draw(COUNTS),
                        terminal_retained_bytes=draw(st.one_of(st.none(), COUNTS)),
                        oldest_retained=oldest))
    document: dict[str, Any] = msgspec.to_builtins(report)
    return document


PIPE = TextForm(styled=False, width=PIPED_WIDTH)
# a terminal: its colour system from TERM and COLORTERM; NO_COLOR leaves bold and italic
TERMINALS = [{"TERM": "xterm-256color"}, {"TERM": "xterm", "NO_COLOR": "1"},
             {"TERM": "linux"}, {"TERM": "xterm", "COLORTERM": "truecolor"}]
FORMS = st.builds(TextForm, styled=st.booleans(), width=st.one_of(
    st.sampled_from([PIPED_WIDTH, 240, 160]), st.integers(min_value=20, max_value=400)))


def _through_rich(data: dict[str, Any], form: TextForm = PIPE,
                  terminal: dict[str, str] | None = None) -> str:
    """What the Rich renderer prints in ``form`` (``Output.out``: a terminal, or not, of
    that width; the terminal's environment ``terminal``), after ``Output.emit`` made the
    data terminal-safe."""
    safe = terminal_safe(copy.deepcopy(data))
    buffer = io.StringIO()
    console = Console(file=buffer, highlight=False, soft_wrap=True, width=form.width,
                      force_terminal=form.styled, force_jupyter=False,
                      _environ=terminal or TERMINALS[0])
    _draw(console, _view(msgspec.convert(safe, ShardReport)))
    return buffer.getvalue()


def _escaped(data: dict[str, Any]) -> ShardReport:
    """What the plain renderer draws from: the copy ``Output.emit`` escaped, read back in
    its Struct (as ``inspect_shard`` does)."""
    return msgspec.convert(controls_escaped(data), ShardReport)


@settings(max_examples=300, deadline=None)
@given(reports(), FORMS, st.sampled_from(TERMINALS))
def test_the_plain_text_is_richs_text_or_nothing(data: dict[str, Any], form: TextForm,
                                                 terminal: dict[str, str]) -> None:
    """For any document — lanes or none, huge counts, paths holding markup, emoji codes,
    control or non-ASCII characters — in any form (through a pipe, on a terminal of any
    colour system, any width), the plain renderer prints Rich's characters exactly, or
    returns None and leaves the document to Rich."""
    plain = _plain(_view(_escaped(data)), form)
    if plain is not None:
        assert plain == _through_rich(data, form, terminal)


def test_an_ordinary_report_is_printed_plain() -> None:
    """A report with an ordinary path and times is printed by the plain renderer (the
    pipe's fast path is taken), and a path Rich would read as markup is not."""
    states = {s.value: 7 for s in MessageState}
    lane = LaneReport(lane="local", gate="OPEN", messages_by_state=states, open_attempts=0,
                      admissions=0, next_due_ms=1, capacity=None, retry_max=5, ordered=False,
                      next_due="2026-01-01T00:00:01.007Z")
    data: dict[str, Any] = msgspec.to_builtins(ShardReport(
        shard="default/0", route="default", partition=0, schema_version=1,
        applied_position=41, records_applied=42, messages_by_state=states,
        open_obligations=0, timeline_head_ms=1, paused=False, activation=None, lanes=[lane],
        timeline_head="2026-01-01T00:00:01.007Z", log_end_position=43, lag=1,
        db=DbReport(path="/var/lib/nereus/state/default/0", estimated_keys=3,
                    live_data_bytes=1000),
        disk=DiskReport(live_bytes=1000, sst_bytes=1000, wal_bytes=0, obsolete_bytes=0,
                        terminal_messages=0, terminal_retained_bytes=0,
                        oldest_retained=None)))
    assert _plain(_view(_escaped(data)), PIPE) == _through_rich(data)
    terminal = TextForm(styled=True, width=160)
    styled = _plain(_view(_escaped(data)), terminal)
    assert styled == _through_rich(data, terminal) and "\x1b[1m" in styled
    # a table wider than the terminal is left to Rich, which fits it
    assert _plain(_view(_escaped(data)), TextForm(styled=True, width=60)) is None
    data["db"]["path"] = "/tmp/[bold]x"
    assert _plain(_view(_escaped(data)), PIPE) is None
