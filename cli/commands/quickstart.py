"""``nereus quickstart``: the embedded end-to-end run on a bare machine.

In a temporary home (or ``--home``): init, start the engine, schedule a handful of
messages a few seconds out, cancel one, reschedule one, show them publish live from the
file destination, stop the engine, replay every shard offline and check the replay
reproduces the live state digest, then say what happened and where to look.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from nereus.cli.setup_documents import PublishedMessage, ReplayCheck
    from nereus.client import Receipt


def _say(env: Env, text: str) -> None:
    if not env.output.json_mode:
        env.output.out.print(text)


def quickstart(
    ctx: typer.Context,
    count: int = typer.Option(6, "--count", min=3, max=1000, help="Messages to schedule."),
    spread: float = typer.Option(4.0, "--spread", min=1.0,
                                 help="Seconds over which they fall due."),
) -> None:
    """Embedded end-to-end run: engine up, schedule, cancel, reschedule, publish, replay, down."""
    import msgspec

    from nereus.adapters.admin.engine_process import start_engine, stop_engine
    from nereus.cli.setup_documents import QuickstartReport
    from nereus.timespec import format_time_ms

    env: Env = ctx.obj
    outbox = _prepare_home(env)
    layout = env.layout
    offset = outbox.stat().st_size if outbox.exists() else 0
    _say(env, f"[bold]1. home[/bold] {layout.root}")
    engine = start_engine(layout, 60, env.output.warn)
    _say(env, f"[bold]2. engine[/bold] started, pid {engine.pid}, shards "
              f"{', '.join(engine.shards)}")
    run_id = uuid.uuid4().hex[:6]
    now_ms = time.time_ns() // 1_000_000
    ids = [f"qs-{run_id}-{n}" for n in range(1, count + 1)]
    cancelled, moved = ids[1], ids[min(3, count - 1)]
    moved_to = now_ms + int(1500 + spread * 1000) + 1500
    receipts: list[Receipt] = []
    try:
        receipts = _submit_all(env, ids, now_ms=now_ms, spread=spread, moved_to=moved_to)
        _say(env, f"[bold]3. scheduled[/bold] {count} messages due over the next "
                  f"{spread + 1.5:.0f} s; cancelled {cancelled}; rescheduled {moved} to "
                  f"{format_time_ms(moved_to)}")
        expected = set(ids) - {cancelled}
        published = _watch(env, outbox, offset, expected, timeout_s=spread + 20)
    finally:
        stopped = stop_engine(layout, 60)
    pid = None if stopped.pid is msgspec.UNSET else stopped.pid  # no pid: it was not running
    _say(env, f"[bold]5. engine[/bold] stopped (pid {pid})")
    replays = _replay_shards(env, engine.shards)
    ok = published.keys() == expected and all(r.match for r in replays)
    report = QuickstartReport(
        ok=ok, home=str(layout.root), outbox=str(outbox),
        engine_log=str(layout.logs / "engine.log"),
        scheduled=ids, cancelled=cancelled, rescheduled=moved,
        published=[published[m] for m in sorted(published)],
        missing=sorted(expected - published.keys()), receipts=receipts, replays=replays)
    if env.output.json_mode:
        # a receipt the engine did not apply in time is QUEUED: without the result keys
        env.output.emit(msgspec.to_builtins(report), lambda _: None)
    else:
        _where_to_look(env, outbox, ok=ok)
    if not ok:
        raise Answered(ExitCode.NO)


def _prepare_home(env: Env) -> Path:
    """A temporary home unless ``--home`` names one; its configuration (written with route
    ``default`` and lane ``local`` when there is none); the ``local`` lane's outbox file."""
    from nereus.config import parse_config
    from nereus.config_template import render_config
    from nereus.errors import NereusError

    if not env.home_explicit:
        env.home = Path(tempfile.mkdtemp(prefix="nereus-quickstart-"))
    layout = env.layout
    if not layout.config.exists():
        layout.root.mkdir(parents=True, exist_ok=True)
        layout.outbox.mkdir(exist_ok=True)
        layout.config.write_text(render_config(route="default", partitions=2, log="file",
                                               route_id=uuid.uuid4().hex))
    env._config = parse_config(layout.config.read_text(), source=str(layout.config))
    config = env.config
    if "local" not in config.lanes:
        raise NereusError(f"{layout.config} has no lane `local`; quickstart publishes to it")
    outbox = Path(config.lanes["local"].path or "outbox/local.jsonl")
    return outbox if outbox.is_absolute() else layout.root / outbox


def _submit_all(env: Env, ids: list[str], *, now_ms: int, spread: float,
                moved_to: int) -> list[Receipt]:
    """Schedule ``ids`` over the next ``spread`` seconds, cancel the second and move the
    fourth (or last) to ``moved_to``, each waiting for the engine's result."""
    from nereus.cli.message_input import prepare_one
    from nereus.cli.submission import submit
    from nereus.client import RouteRef, prepare_cancel, prepare_reschedule

    count = len(ids)
    prepared = [
        prepare_one(env, lane="local", deliver_at_ms=now_ms + int(1500 + spread * 1000 * n
                                                                  / count),
                    expire_at_ms=None, key=f"k{n}", headers={"source": "quickstart"},
                    body=json.dumps({"n": n}).encode(), message_id=mid, route="default")
        for n, mid in enumerate(ids, start=1)
    ]
    route = RouteRef("default", env.config.route("default").partitions)
    receipts = submit(env, prepared, wait=True)
    receipts += submit(env, [prepare_cancel(route, command_id=str(uuid.uuid4()),
                                            delay_message_id=ids[1])], wait=True)
    receipts += submit(env, [prepare_reschedule(route, command_id=str(uuid.uuid4()),
                                                delay_message_id=ids[min(3, count - 1)],
                                                deliver_at_ms=moved_to)], wait=True)
    return receipts


def _where_to_look(env: Env, outbox: Path, *, ok: bool) -> None:
    """The closing lines for people: where the run left its traces, and the verdict."""
    layout = env.layout
    _say(env, "\n[bold]Where to look[/bold]")
    _say(env, f"  published messages   {outbox}")
    _say(env, f"  engine log           {layout.logs / 'engine.log'}")
    _say(env, f"  a shard, offline     nereus --home {layout.root} shard inspect "
              f"default/0")
    _say(env, f"  start it again       nereus --home {layout.root} engine start")
    _say(env, "[green]quickstart ok[/green]" if ok else "[red]quickstart FAILED[/red]")


def _replay_shards(env: Env, shards: list[str]) -> list[ReplayCheck]:
    """Replay every shard's log offline from empty and compare with the live digest."""
    from nereus.adapters.backends.shardlog.file_log import FileShardLog
    from nereus.adapters.offline.log_replay import replay_empty, store_digest
    from nereus.cli.setup_documents import ReplayCheck
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore

    layout = env.layout
    replays: list[ReplayCheck] = []
    for shard_name in shards:
        shard = ShardId.parse(shard_name)
        with ShardStore.open(layout.shard_state(shard), read_only=True) as live:
            live_digest = store_digest(live)
        log = FileShardLog(layout.shard_log(shard))
        with tempfile.TemporaryDirectory() as scratch:
            report = replay_empty(log, shard, Path(scratch) / "db")
        log.close()
        replays.append(ReplayCheck(shard=shard_name, records=report.records,
                                   live_digest=live_digest, replay_digest=report.digest,
                                   match=live_digest == report.digest))
    _say(env, "[bold]6. replay[/bold] each shard's log offline from empty, compared with "
              "the live state")
    for r in replays:
        verdict = "[green]match[/green]" if r.match else "[red]DIFFER[/red]"
        _say(env, f"   {r.shard}: {r.records} records replayed, digest "
                  f"{r.replay_digest[:16]}.. {verdict} the live state")
    return replays


def _watch(env: Env, outbox: Path, offset: int, expected: set[str],
           timeout_s: float) -> dict[str, PublishedMessage]:
    """Print publishes as they land in the outbox; return them by delay message id."""
    import msgspec

    from nereus.cli.setup_documents import PublishedMessage
    from nereus.timespec import parse_time_ms

    _say(env, "[bold]4. publishing[/bold] (watching the outbox live)")
    seen: dict[str, PublishedMessage] = {}
    deadline = time.monotonic() + timeout_s
    buffer = b""
    while expected - seen.keys() and time.monotonic() < deadline:
        if outbox.exists():
            with open(outbox, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            offset += len(chunk)
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = json.loads(raw)
                mid = line["delay_message_id"]
                if mid not in expected or mid in seen:
                    continue
                late = parse_time_ms(line["published_at"]) - parse_time_ms(line["deliver_at"])
                seen[mid] = msgspec.convert({**line, "lateness_ms": late}, PublishedMessage)
                _say(env, f"   published {mid}  deliver_at {line['deliver_at']}  "
                          f"published_at {line['published_at']}  (+{late} ms)")
        time.sleep(0.05)
    return seen
