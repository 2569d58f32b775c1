"""The few lines at the top of a lane or shard screen: the row's fields spelled out."""

from __future__ import annotations

from rich.text import Text

from nereus.terminal_text import escape_controls
from nereus.timespec import format_duration_ms
from nereus.tui.formatting import fmt_backlog, fmt_due_lag, fmt_int, fmt_rate, fmt_text
from nereus.tui.models import LaneRow, ShardRow


def _pairs(text: Text, pairs: list[tuple[str, str]]) -> None:
    for index, (label, value) in enumerate(pairs):
        if index:
            text.append("  ")
        text.append(f"{label} ", style="dim")
        text.append(escape_controls(value),
                    style="bold" if value in ("CLOSED", "NOT_READY", "FAILED") else "")


def lane_summary(lane: LaneRow) -> Text:
    text = Text()
    _pairs(text, [("lane", lane.lane), ("destination", fmt_text(lane.destination)),
                  ("gate", lane.gate), ("readiness", lane.readiness)])
    if lane.not_ready_reason:
        text.append(f"\nnot ready: {escape_controls(lane.not_ready_reason)}", style="red")
    text.append("\n")
    _pairs(text, [("due", fmt_backlog(lane.due_backlog, lane.due_backlog_capped)),
                  ("p99 lag", fmt_due_lag(lane.due_lag_p99_ms, lane.due_backlog)),
                  ("max lag", fmt_due_lag(lane.due_lag_max_ms, lane.due_backlog)),
                  ("in flight", fmt_int(lane.in_flight)),
                  ("open attempts", fmt_int(lane.open_attempts))])
    text.append("\n")
    _pairs(text, [("published", fmt_int(lane.published)), ("failures", fmt_int(lane.failures)),
                  ("admissions", fmt_int(lane.admissions)),
                  ("rate", fmt_rate(lane.admission_rate))])
    if lane.messages_by_state:
        text.append("\nmessages  ", style="dim")
        _pairs(text, [(state.lower(), fmt_int(count)) for state, count in lane.messages_by_state])
    if lane.waiting_by_reason:
        text.append("\nwaiting  ", style="dim")
        _pairs(text, [(why, fmt_int(count)) for why, count in lane.waiting_by_reason])
    if lane.uncertain:
        age = format_duration_ms(lane.uncertain_oldest_age_ms or 0)
        text.append(f"\n{lane.uncertain:,} attempt(s) UNCERTAIN, the oldest for {age} "
                    "(settle-lane-uncertain settles them)", style="bold yellow")
    if lane.destination and lane.fencing is None:
        text.append("\ndoes not fence a dead owner's sends: after a crash its in-flight "
                    "attempts stay UNCERTAIN", style="yellow")
    return text


def shard_summary(shard: ShardRow) -> Text:
    text = Text()
    _pairs(text, [("shard", shard.shard), ("state", shard.state),
                  ("epoch", fmt_int(shard.epoch)), ("uncertain", fmt_int(shard.uncertain))])
    text.append("\n")
    _pairs(text, [("applied", fmt_int(shard.applied_position)),
                  ("log end", fmt_int(shard.log_end_position)), ("lag", fmt_int(shard.lag)),
                  ("due", fmt_backlog(shard.due_backlog, shard.due_backlog_capped))])
    text.append("\n")
    _pairs(text, [("admissions", fmt_int(shard.admissions)),
                  ("rate", fmt_rate(shard.admission_rate)), ("claims", fmt_int(shard.claims)),
                  ("in flight", fmt_int(shard.in_flight))])
    if shard.error:
        text.append(f"\nerror: {escape_controls(shard.error)}", style="bold red")
    return text
