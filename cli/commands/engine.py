"""``nereus engine``: start, stop and ask the daemon that owns this home's shards."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(help="Start, stop and query the engine daemon.", no_args_is_help=True)


def start_daemon(env: Env, timeout: float) -> dict[str, Any]:
    """Start the daemon detached and wait until its admin socket answers."""
    from nereus.adapters.admin_client import AdminClient
    from nereus.engine.daemon import AlreadyRunning, is_locked, lock_holder, socket_path
    from nereus.errors import NereusError

    env.config  # noqa: B018 - fail early and clearly when the home has no valid config
    home = env.home.resolve()
    if is_locked(home):  # the home directory's lock, not the pid file (which may be gone)
        raise AlreadyRunning(f"an engine already runs on {home} (pid {lock_holder(home) or '?'})",
                             hint="stop it with `nereus engine stop`")
    env.layout.logs.mkdir(parents=True, exist_ok=True)
    out_path = env.layout.logs / "engine.out"
    with open(out_path, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nereus.engine.daemon", "--home", str(home)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            close_fds=True,
        )
    client = AdminClient(socket_path(home), timeout=5)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            tail = out_path.read_text(errors="replace").strip().splitlines()[-5:]
            raise NereusError(f"the engine exited with status {code} while starting",
                              hint=" | ".join(tail) or f"see {out_path}")
        if socket_path(home).exists():
            try:
                status = client.get("/v1/status")
            except NereusError:
                pass
            else:
                # another engine's socket is not an answer: ours then exits (home locked)
                if status["owner_id"].split(":")[1] == str(proc.pid):
                    for shard in status["shards"]:
                        if shard["state"] == "FAILED":
                            env.output.warn(f"shard {shard['shard']} is FAILED: "
                                            f"{shard['error']}")
                    return {"running": True, "pid": proc.pid,
                            "socket": str(socket_path(home)),
                            "log": str(env.layout.logs / "engine.log"),
                            "shards": [s["shard"] for s in status["shards"]]}
        time.sleep(0.05)
    raise NereusError(f"the engine did not answer within {timeout:.0f} s",
                      hint=f"see {env.layout.logs / 'engine.log'}")


def stop_daemon(env: Env, timeout: float) -> dict[str, Any]:
    """Ask the daemon to stop (SIGTERM if the socket is gone) and wait for it to exit."""
    import os
    import signal

    from nereus.adapters.admin_client import AdminClient
    from nereus.engine.daemon import is_locked, lock_holder, socket_path
    from nereus.errors import NereusError

    home = env.home.resolve()
    pid = lock_holder(home)  # the lock's holder, whatever became of the pid file
    if not is_locked(home):
        return {"running": False, "stopped": False}
    try:
        AdminClient(socket_path(home), timeout=5).post("/v1/shutdown", {})
    except NereusError:
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while is_locked(home):
        if time.monotonic() > deadline:
            raise NereusError(f"the engine (pid {pid}) did not stop within {timeout:.0f} s",
                              hint=f"see {env.layout.logs / 'engine.log'}")
        time.sleep(0.05)
    return {"running": False, "stopped": True, "pid": pid}


@app.command("start")
def start(
    ctx: typer.Context,
    foreground: Annotated[bool, typer.Option(
        "--foreground", help="Stay attached (for systemd and tests); logs also to the console.")]
    = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the engine to be ready.")]
    = 60.0,
) -> None:
    """Start the daemon (admin socket at <home>/run/admin.sock)."""
    env: Env = ctx.obj
    if foreground:
        from nereus.engine.daemon import run

        env.config  # noqa: B018 - fail early and clearly when the home has no valid config
        status = run(env.home.resolve(), foreground=True)  # the daemon said why on stderr
        if status:
            raise Answered(ExitCode(status))
        return
    data = start_daemon(env, timeout)
    env.output.emit(data, lambda out: out.print(
        f"engine started (pid {data['pid']}) with {len(data['shards'])} shard(s); "
        f"socket {data['socket']}, log {data['log']}"))


@app.command("stop")
def stop(
    ctx: typer.Context,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for a graceful stop.")] = 60.0,
) -> None:
    """Stop the daemon gracefully: in-flight publishes settle or are recorded UNKNOWN."""
    env: Env = ctx.obj
    data = stop_daemon(env, timeout)
    env.output.emit(data, lambda out: out.print(
        f"engine stopped (pid {data['pid']})" if data["stopped"] else "the engine is not running"))


@app.command("status")
def status(ctx: typer.Context) -> None:
    """Is the engine running; its shards, lanes and clock."""
    from nereus.errors import EngineUnreachable

    env: Env = ctx.obj
    try:
        data = env.admin().get("/v1/status")
    except EngineUnreachable as exc:
        # the error document (--json) says "not running" too
        raise EngineUnreachable(exc.message, hint=exc.hint,
                                document={"running": False}) from None

    def human(out: Console) -> None:
        from rich.table import Table

        out.print(f"engine running as {data['owner_id']} since {data['started_at']}; "
                  f"Trusted UTC ±{data['trusted_time']['uncertainty_ms'] // 2} ms")
        shards = Table("shard", "state", "applied", "lag", "in flight", "uncertain")
        for s in data["shards"]:
            shards.add_row(s["shard"], s["state"], str(s["applied_position"]), str(s["lag"]),
                           str(s["in_flight"]), str(s["uncertain"]))
        out.print(shards)
        for s in data["shards"]:
            if s.get("waiting"):
                out.print(f"{s['shard']} admits nothing now: {s['waiting']}")
        lanes = Table("lane", "gate", "readiness", "due backlog", "published", "failures")
        for lane in data["lanes"]:
            lanes.add_row(lane["lane"], lane["gate"], lane["readiness"],
                          str(lane["due_backlog"]), str(lane["published"]),
                          str(lane["failures"]))
        out.print(lanes)
        troubled = [w for w in data.get("workers", [])
                    if w["restarts"] or w["state"] not in ("RUNNING", "STOPPED")]
        if troubled:
            workers = Table("worker", "state", "restarts", "last error", "at")
            for w in troubled:
                workers.add_row(w["name"], w["state"], str(w["restarts"]),
                                w["last_error"] or "", w["last_error_at"] or "")
            out.print(workers)
        else:
            out.print(f"{len(data.get('workers', []))} workers running, none restarted")
        for problem in data["problems"]:
            out.print(f"[red]not healthy:[/red] {problem}")

    env.output.emit(data, human)
    if not data["healthy"]:
        raise Answered(ExitCode.NO)
