"""``nereus status``: one screen that says whether all is well, and what to look at if not.

With the engine running it summarises ``engine status`` (``/v1/status``); without, it says
so and reads each shard's lane counters from its database, read-only (the counters are
kept by ``apply``, so this is a few point reads per shard, never a scan).

The counts are whole and say whose they are:

* a standalone home's shard that no loop of the engine holds now (moving between worker
  processes, refused, on a full disk) is counted from its database, read-only, as when
  the engine is stopped (``counted_from_disk`` names them), so messages stored never read
  as "none";
* on a node of a cluster, only this node's shards are this home's: the document says so
  (``node_id``, ``cluster_shards``) and ``nereus cluster status`` shows every shard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import typer

from nereus.cli.context import Env
from nereus.shard import ShardId

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
    # a node of a cluster: its id; the shards and messages shown are this node's only
    node_id: str | None = None
    cluster_shards: int | None = None  # on a node: how many shards the cluster has
    # shards no engine loop holds now, their messages counted from their database
    counted_from_disk: list[str] = msgspec.field(default_factory=list)
    # an engine that holds the home without its admin socket (deleted under it): its pid;
    # engine_running is true and the counts are read from the databases
    unreachable_pid: int | None = None


def status(ctx: typer.Context) -> None:
    """One-screen summary: engine, shards, messages by state, lanes, problems. On a node
    of a cluster, the node's shards only (it says so; `cluster status` shows them all)."""
    env: Env = ctx.obj
    env._orphan_said = True  # an engine without its socket is one of the problems listed
    document = _online(env) if env.engine_running() else _offline(env)
    env.output.emit(msgspec.to_builtins(document), lambda out: _human(out, document))


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for state, n in counts.items():
        if n:
            into[state] = into.get(state, 0) + n


def _online(env: Env) -> StatusSummary:
    from nereus.adapters.admin.wire import EngineStatus

    data = msgspec.convert(env.admin().get("/v1/status"), EngineStatus)
    shards: dict[str, int] = {}
    for shard in data.shards:
        shards[shard.state] = shards.get(shard.state, 0) + 1
    cluster = env.config.cluster
    counted = {row.shard for lane in data.lanes for row in lane.shards}
    # a standalone home's shards no loop holds now: their databases are this home's
    missing = [] if cluster is not None else [
        shard for shard in _configured(env) if str(shard) not in counted]
    on_disk = _disk_counts(env, missing)
    messages: dict[str, int] = {}
    lanes = []
    for lane in data.lanes:
        by_state = dict(lane.messages_by_state)
        _add(by_state, on_disk.pop(lane.lane, {}))
        _add(messages, by_state)
        lanes.append(LaneSummary(lane=lane.lane, gate=lane.gate, readiness=lane.readiness,
                                 due_backlog=lane.due_backlog,
                                 messages_by_state=by_state,
                                 due_backlog_capped=lane.due_backlog_capped))
    for name, by_state in sorted(on_disk.items()):  # lanes only the databases know now
        _add(messages, by_state)
        lanes.append(LaneSummary(lane=name, gate=None, readiness=None, due_backlog=None,
                                 messages_by_state=by_state))
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
                         messages_by_state=messages, lanes=lanes,
                         node_id=None if cluster is None else cluster.node_id,
                         cluster_shards=None if cluster is None else len(_configured(env)),
                         counted_from_disk=[str(shard) for shard in missing])


def _configured(env: Env) -> list[ShardId]:
    return [ShardId(route.name, partition) for route in env.config.routes.values()
            for partition in range(route.partitions)]


def _disk_counts(env: Env, shards: list[ShardId]) -> dict[str, dict[str, int]]:
    """Each lane's messages by state over ``shards``, read from their databases
    (read-only: a few point reads each; a shard that never ran has none)."""
    from nereus.errors import NotFound
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Lane, decode_value

    by_lane: dict[str, dict[str, int]] = {}
    for shard in shards:
        try:
            store = ShardStore.open(env.layout.shard_state(shard), read_only=True)
        except NotFound:
            continue  # never ran: nothing applied
        with store:
            for _, raw in store.scan_prefix(keys.LANE):
                lane = decode_value(raw, Lane)
                _add(by_lane.setdefault(lane.name, {}), lane.counts)
    return by_lane


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
    from nereus.adapters.home.home_lock import orphaned_engine, socket_lost

    pid = orphaned_engine(env.home)
    if pid is not None:
        lost = socket_lost(env.home, pid)
        problem = f"{lost.message}: {lost.hint}"
    return StatusSummary(
        home=str(env.home), engine_running=pid is not None, healthy=False,
        problems=[problem if pid is not None else
                  "the engine is not running: `nereus engine start`"],
        unreachable_pid=pid,
        owner_id=None, started_at=None,
        shards_by_state={"UNREACHABLE" if pid is not None else "OFFLINE": shards},
        uncertain=uncertain, messages_by_state=messages,
        lanes=[LaneSummary(lane=name, gate=None, readiness=None, due_backlog=None,
                           messages_by_state=counts) for name, counts in sorted(by_lane.items())])


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {state}" for state, n in sorted(counts.items())) or "none"


def _human(out: Console, data: StatusSummary) -> None:
    from rich.table import Table

    mark = "[green]healthy[/green]" if data.healthy else "[red]needs attention[/red]"
    engine = (f"engine running as {data.owner_id} since {data.started_at}"
              if data.owner_id is not None else
              f"engine running (pid {data.unreachable_pid or '?'}) but unreachable: its "
              "admin socket is gone" if data.engine_running else "engine not running")
    out.print(f"{data.home}: {mark}; {engine}")
    whose = ""
    if data.node_id is not None:
        held = sum(data.shards_by_state.values())
        whose = f" on node {data.node_id}'s shards"
        out.print(f"node {data.node_id} of a cluster: its {held} shard(s) of the cluster's "
                  f"{data.cluster_shards} are shown (`nereus cluster status` shows every "
                  "shard and its owner)")
    out.print(f"shards: {_counts(data.shards_by_state)}")
    out.print(f"messages{whose}: {_counts(data.messages_by_state)}")
    if data.counted_from_disk:
        out.print(f"(counted from their databases, no engine loop holds them now: "
                  f"{', '.join(data.counted_from_disk)})")
    lanes = Table("lane", "gate", "readiness", "due backlog", "messages")
    for lane in data.lanes:
        lanes.add_row(lane.lane, lane.gate or "-", lane.readiness or "-",
                      "-" if lane.due_backlog is None else f"{lane.due_backlog:,}"
                      + ("+" if lane.due_backlog_capped else ""),
                      _counts(lane.messages_by_state))
    out.print(lanes)
    for problem in data.problems:
        out.print(f"[yellow]![/yellow] {problem}")
