"""The cluster screen's tables and its heading, drawn from ``nereus.tui.cluster_models``.

Shards in motion (MOVING, RECOVERING) are drawn in yellow across the whole row, UNOWNED and
FAILED in red, so a move in progress stands out in a long list; the moves table repeats them alone.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from nereus.terminal_text import escape_controls
from nereus.tui.cluster_models import ClusterPanel, NodeRow, OwnershipRow
from nereus.tui.formatting import fmt_int, fmt_text
from nereus.tui.widgets.tables import RowTable

_STATE_STYLE = {"ACTIVE": "green", "MOVING": "bold yellow", "RECOVERING": "bold yellow",
                "FAILED": "bold red", "OWNER_LOST": "bold red", "UNOWNED": "bold red"}


def _cell(value: str | None, style: str) -> Text:
    return Text(escape_controls(fmt_text(value)), style=style)


def _row_style(row: OwnershipRow) -> str:
    return "" if row.state == "ACTIVE" else _STATE_STYLE[row.state]


class NodeTable(RowTable[NodeRow]):
    COLUMNS = ("node", "alive", "leader", "draining", "shards", "address", "held")

    def cells(self, row: NodeRow) -> tuple[RenderableType, ...]:
        name = Text(escape_controls(row.node_id), style="bold" if row.this_node else "")
        if row.this_node:
            name.append(" (this)", style="dim")
        return (name,
                Text("yes", style="green") if row.alive else Text("NO", style="bold red"),
                Text("★ leader", style="bold cyan") if row.leader else "",
                Text("DRAINING", style="bold yellow") if row.draining else "",
                Text(str(len(row.shards)), justify="right"),
                fmt_text(row.address), " ".join(row.shards))


class OwnershipTable(RowTable[OwnershipRow]):
    COLUMNS = ("shard", "state", "owner", "epoch", "placed on")

    def cells(self, row: OwnershipRow) -> tuple[RenderableType, ...]:
        style = _row_style(row)
        placed = fmt_text(row.placed_on) + (" (pinned)" if row.pinned else "")
        return (_cell(row.shard, style), Text(row.state, style=_STATE_STYLE[row.state]),
                _cell(row.owner, style), Text(fmt_int(row.epoch), style=style, justify="right"),
                _cell(placed, style))


class MoveTable(RowTable[OwnershipRow]):
    """The shards in motion: from the owner to where the placement says."""

    COLUMNS = ("shard", "state", "from", "to", "epoch", "detail")

    def cells(self, row: OwnershipRow) -> tuple[RenderableType, ...]:
        style = _row_style(row)
        return (_cell(row.shard, style), Text(row.state, style=_STATE_STYLE[row.state]),
                _cell(row.owner, style), _cell(row.placed_on, style),
                Text(fmt_int(row.epoch), style=style, justify="right"),
                _cell(row.detail, style))


def cluster_heading(panel: ClusterPanel, where: str, interval_s: float) -> Text:
    """Two or three lines: live or stale, the cluster and its leader, the shard counts,
    and, when reads fail, why."""
    text = Text()
    overview = panel.overview
    if panel.connected:
        text.append("● live", style="bold green")
    elif overview is not None:
        text.append("○ stale", style="bold yellow")
    else:
        text.append("○ reading", style="bold yellow")
    text.append(f"  coordinator {escape_controls(where)}", style="dim")
    text.append(f"  every {interval_s:g} s", style="dim")
    if overview is not None:
        text.append(f"\ncluster {escape_controls(overview.cluster)}  leader ")
        text.append(escape_controls(overview.leader or "none"),
                    style="bold cyan" if overview.leader else "bold red")
        text.append(f"  this node {escape_controls(overview.this_node or '-')}")
        text.append(f"  configuration r{fmt_int(overview.config_revision)}")
        text.append(f"\nshards {len(overview.shards)}:")
        for state in ("ACTIVE", "MOVING", "RECOVERING", "UNOWNED"):
            count = overview.count(state)
            text.append(f" {state} ")
            text.append(str(count), style=_STATE_STYLE[state] if count else "")
        if failed := overview.count("FAILED"):  # named only when there is one
            text.append(" FAILED ")
            text.append(str(failed), style=_STATE_STYLE["FAILED"])
        if overview.config_problem:
            text.append(f"\n{escape_controls(overview.config_problem)}", style="red")
    if not panel.connected and panel.failures:
        text.append(f"\ncannot read the coordinator: {escape_controls(panel.problem or '?')}",
                    style="bold red")
        if panel.hint:
            text.append(f"\n{escape_controls(panel.hint)}")
        text.append(f" — retrying (attempt {panel.failures})")
    return text
