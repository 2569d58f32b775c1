"""``nereus status``: one screen that says whether all is well, and what to look at if not.

With the engine running it summarises ``engine status`` (``/v1/status``); without, it says
so and reads each shard's lane counters from its database, read-only (the counters are
kept by ``apply``, so this is a few point reads per shard, never a scan).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console


class LaneSummary(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One lane: gate and readiness (null offline), due backlog (null offline), and its
    messages by state over every shard."""

    lane: str
    gate: str | None
    readiness: str | None
    due_backlog: int | None
    messages_by_state: dict[str, int]
    due_backlog_capped: bool = False  # due_backlog is "at least" (the engine counts to a cap)


class StatusSummary(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``status`` document. ``healthy``: the engine runs and reports no problem, and no
    attempt is UNCERTAIN (UNKNOWN). ``shards_by_state`` counts the engine's shard loops
    (``OFFLINE`` for each configured shard when no engine runs)."""

    home: str
    engine_running: bool
    healthy: bool
    problems: list[str]
    owner_id: str | None
    started_at: str | None
    shards_by_state: dict[str, int]
    uncertain: int
    messages_by_state: dict[str, int]
    lanes: list[LaneSummary]


def status(ctx: typer.Context) -> None:
    """One-screen summary: engine, shards, messages by state, lanes, problems."""
    env: Env = ctx.obj
    document = _online(env) if env.engine_running() else _offline(env)
    env.output.emit(msgspec.to_builtins(document), lambda out: _human(out, document))


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for state, n in counts.items():
        if n:
            into[state] = into.get(state, 0) + n


def _online(env: Env) -> StatusSummary:
    from nereus.engine.admin.documents import EngineStatus

    data = msgspec.convert(env.admin().get("/v1/status"), EngineStatus)
    shards: dict[str, int] = {}
    for shard in data.shards:
        shards[shard.state] = shards.get(shard.state, 0) + 1
    messages: dict[str, int] = {}
    lanes = []
    for lane in data.lanes:
        _add(messages, lane.messages_by_state)
        lanes.append(LaneSummary(lane=lane.lane, gate=lane.gate, readiness=lane.readiness,
                                 due_backlog=lane.due_backlog,
                                 messages_by_state=lane.messages_by_state,
                                 due_backlog_capped=lane.due_backlog_capped))
    uncertain = sum(shard.uncertain for shard in data.shards)
    problems = list(data.problems)
    if uncertain:
        problems.append(f"{uncertain} attempt(s) UNCERTAIN: see `nereus attempt list "
                        "--state unknown`")
    problems += [f"lane {lane.lane} is {lane.readiness}" for lane in lanes
                 if lane.readiness not in ("READY", None)]
    return StatusSummary(home=str(env.home), engine_running=True,
                         healthy=data.healthy and not uncertain, problems=problems,
                         owner_id=data.owner_id, started_at=data.started_at,
                         shards_by_state=shards, uncertain=uncertain,
                         messages_by_state=messages, lanes=lanes)


def _offline(env: Env) -> StatusSummary:
    from nereus.errors import NotFound
    from nereus.shard import ShardId
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Lane, decode_value

    config = env.config
    by_lane: dict[str, dict[str, int]] = {name: {} for name in config.lanes}
    shards = 0
    for route in config.routes.values():
        for partition in range(route.partitions):
            shards += 1
            try:
                store = ShardStore.open(env.layout.shard_state(ShardId(route.name, partition)),
                                        read_only=True)
            except NotFound:
                continue  # never ran: nothing applied
            with store:
                for name in config.lanes:
                    raw = store.get(keys.lane_key(name))
                    if raw is not None:
                        _add(by_lane[name], decode_value(raw, Lane).counts)
    messages: dict[str, int] = {}
    for counts in by_lane.values():
        _add(messages, counts)
    uncertain = messages.get("UNCERTAIN", 0)
    return StatusSummary(
        home=str(env.home), engine_running=False, healthy=False,
        problems=["the engine is not running: `nereus engine start`"],
        owner_id=None, started_at=None, shards_by_state={"OFFLINE": shards},
        uncertain=uncertain, messages_by_state=messages,
        lanes=[LaneSummary(lane=name, gate=None, readiness=None, due_backlog=None,
                           messages_by_state=counts) for name, counts in sorted(by_lane.items())])


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {state}" for state, n in sorted(counts.items())) or "none"


def _human(out: Console, data: StatusSummary) -> None:
    from rich.table import Table

    mark = "[green]healthy[/green]" if data.healthy else "[red]needs attention[/red]"
    engine = (f"engine running as {data.owner_id} since {data.started_at}"
              if data.engine_running else "engine not running")
    out.print(f"{data.home}: {mark}; {engine}")
    out.print(f"shards: {_counts(data.shards_by_state)}")
    out.print(f"messages: {_counts(data.messages_by_state)}")
    lanes = Table("lane", "gate", "readiness", "due backlog", "messages")
    for lane in data.lanes:
        lanes.add_row(lane.lane, lane.gate or "-", lane.readiness or "-",
                      "-" if lane.due_backlog is None else f"{lane.due_backlog:,}"
                      + ("+" if lane.due_backlog_capped else ""),
                      _counts(lane.messages_by_state))
    out.print(lanes)
    for problem in data.problems:
        out.print(f"[yellow]![/yellow] {problem}")
