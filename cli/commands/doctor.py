"""``nereus doctor``: what is wrong with this home, and what to fix.

Config (parse and validation, with file and line), home and socket permissions, disk
space, every configured broker and object store reachable, clock uncertainty, engine
state (healthy: no FAILED shard or worker; running with its admin socket and pid file),
attempts UNCERTAIN for longer than ``--uncertain-after``. Exit 1 with the list of what
failed.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nereus.cli.commands.doctor_certificates import certificate_checks
from nereus.cli.commands.doctor_routes import (
    check,
    command_topic,
    log_continuity,
    service_checks,
    unconfigured_lanes,
)
from nereus.cli.commands.doctor_secrets import destination_replication, secret_checks
from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.setup_documents import DoctorCheck
    from nereus.config import Config

MIN_FREE_BYTES = 1 << 30
UNCERTAIN_AFTER = "10m"  # an attempt UNKNOWN for longer needs an operator (`attempt resolve`)
UNCERTAIN_SHOWN = 5  # attempts named in the check's detail, at most
UNCERTAIN_LISTED = 10_000  # attempts asked of a running engine, at most


def _bytes(size: int) -> str:
    """A size as an operator reads it: GiB from one GiB up, MiB below (a small disk is
    "12.0 MiB", not "0.0 GiB")."""
    if size >= 1 << 30:
        return f"{size / (1 << 30):.1f} GiB"
    return f"{size / (1 << 20):.1f} MiB"


def doctor(
    ctx: typer.Context,
    uncertain_after: Annotated[str, typer.Option(
        "--uncertain-after", metavar="DURATION",
        help="Fail when an attempt has been UNCERTAIN (UNKNOWN) for longer than this since "
        "its admission (the engine's evidence search did not settle it: an operator must).")]
    = UNCERTAIN_AFTER,
) -> None:
    """Check config, permissions, disk, services, clock, the engine and UNCERTAIN attempts;
    exit 1 listing what to fix."""
    import msgspec

    from nereus.cli.setup_documents import DoctorReport
    from nereus.errors import NereusError
    from nereus.timespec import parse_duration_ms

    env: Env = ctx.obj
    after_ms = parse_duration_ms(uncertain_after, field="--uncertain-after")
    layout = env.layout
    checks: list[DoctorCheck] = []
    config = None
    try:
        config = env.config
        checks.append(check("config", True, f"{layout.config} is valid: "
                             f"{len(config.routes)} route(s), {len(config.lanes)} lane(s)"))
    except NereusError as exc:
        checks.append(check("config", False, exc.message, exc.hint or "fix nereus.toml"))
    checks.extend(_home_checks(env, config, after_ms))
    if config is not None:
        checks.extend(_config_checks(env, config))
    ok = all(c.ok or c.severity == "warning" for c in checks)
    data = msgspec.to_builtins(DoctorReport(ok=ok, home=str(layout.root), checks=checks))
    env.output.emit(data, lambda out: _human(out, data, checks, ok))
    if not ok:
        raise Answered(ExitCode.NO)


def _home_checks(env: Env, config: Config | None, after_ms: int) -> list[DoctorCheck]:
    """The home, its admin socket, the engine, UNCERTAIN attempts, privacy and disk."""
    layout = env.layout
    checks: list[DoctorCheck] = []
    if layout.root.is_dir():
        writable = os.access(layout.root, os.W_OK)
        checks.append(check("home", writable, f"{layout.root} is "
                             f"{'writable' if writable else 'NOT writable'}",
                             f"chown/chmod {layout.root} for this user"))
    else:
        checks.append(check("home", False, f"{layout.root} does not exist",
                             "run `nereus init`"))
    sock = layout.run / "admin.sock"
    if sock.exists():
        mode = stat.S_IMODE(sock.stat().st_mode)
        checks.append(check("admin_socket", mode == 0o600,
                             f"{sock} mode {mode:04o}", f"chmod 600 {sock}"))
    checks.append(_engine(env))
    if config is not None:
        checks.append(_uncertain(env, config, after_ms))
        checks.append(_fencing(config))
    if layout.root.is_dir():
        checks.append(_privacy(layout.root))
        usage = shutil.disk_usage(layout.root)
        checks.append(check("disk", usage.free >= MIN_FREE_BYTES,
                             f"{_bytes(usage.free)} free of {_bytes(usage.total)}",
                             "free space: logs, state and checkpoints need room to grow"))
    return checks


def _config_checks(env: Env, config: Config) -> list[DoctorCheck]:
    """Secrets, certificates, services, the object store, the clock, lanes, logs and
    topics."""
    checks: list[DoctorCheck] = list(secret_checks(config, env.layout.root))
    checks.extend(certificate_checks(config, env.layout.root, datetime.now(UTC)))
    services = service_checks(config)
    checks.extend(services)
    checks.append(_object_store(env))
    checks.append(_clock(config))
    checks.append(unconfigured_lanes(env, config))
    checks.extend(log_continuity(env, config))
    silent = {c.name for c in services if not c.ok}
    checks.extend(destination_replication(config, silent))
    for route in config.routes.values():
        if route.log == "kafka":
            checks.extend(command_topic(env, route, silent))
    if config.cluster is not None:
        from nereus.cli.commands.cluster.access import now_ms
        from nereus.cli.commands.doctor_keys import evidence_key_checks

        checks.extend(evidence_key_checks(env, now_ms()))
    return checks


def _human(out: Console, data: Any, checks: list[DoctorCheck], ok: bool) -> None:
    from nereus.cli.output import safe_markup as escape

    for c in data["checks"]:  # made terminal-safe by emit
        mark = "[green]ok[/green]  " if c["ok"] else (
            "[yellow]warn[/yellow]" if c["severity"] == "warning" else "[red]FAIL[/red]")
        out.print(f"{mark} {escape(c['name']):<28} {escape(c['detail'])}", highlight=False)
        if not c["ok"] and c["fix"]:
            out.print(f"       fix: {escape(c['fix'])}", highlight=False)
    failed = sum(1 for c in checks if not c.ok and c.severity != "warning")
    warned = sum(1 for c in checks if not c.ok and c.severity == "warning")
    note = f" ({warned} warning{'s' if warned != 1 else ''})" if warned else ""
    out.print(f"[green]all checks passed[/green]{note}" if ok
              else f"[red]{failed} to fix[/red]{note}")


def _engine(env: Env) -> DoctorCheck:
    """Running and healthy (every shard and worker), or not running; a running engine with
    a FAILED shard or worker, or one that holds the home without its admin socket or its
    pid file (a start that hangs, files deleted under it), fails the doctor."""
    from nereus.adapters.home.home_lock import (
        is_locked,
        lock_holder,
        pid_file,
        read_pid,
        socket_path,
    )
    from nereus.errors import NereusError

    if not is_locked(env.home):
        return check("engine", True, "the engine is not running")
    pid = lock_holder(env.home)
    written = read_pid(env.home)
    missing = [f"its admin socket {socket_path(env.home)}"] \
        if not socket_path(env.home).exists() else []
    if written is None:
        missing.append(f"its pid file {pid_file(env.home)}")
    elif pid is not None and written != pid:
        missing.append(f"its pid file (which names pid {written})")
    if missing:
        return check("engine", False, f"the engine (pid {pid or '?'}) runs without "
                      + " and without ".join(missing),
                      "if it is starting, wait for it; else `nereus engine logs --level error` "
                      "says why, and `nereus engine stop` then `nereus engine start` give it "
                      "back its files")
    try:
        status = env.admin().get("/v1/status")
    except NereusError as exc:
        return check("engine", False, f"the engine runs but its status failed: {exc.message}",
                      "see <home>/log/engine.log; restart it with `nereus engine stop` and "
                      "`nereus engine start`")
    problems = status.get("problems", [])
    if problems:
        return check("engine", False, "the engine is running, not healthy: "
                      + "; ".join(problems),
                      "`nereus engine status` and <home>/log/engine.log say why; fix the "
                      "cause (a shard log that ends before its database: restore the shard "
                      "from its Recovery Set), then restart the engine")
    return check("engine", True, f"the engine is running: {len(status['shards'])} shard(s) "
                  f"and {len(status['workers'])} worker(s) healthy")


def _privacy(root: Path) -> DoctorCheck:
    """The home is 0700 and its files 0600: nothing in it for other users of the host."""
    from nereus.adapters.home.private_files import loose_modes

    loose = list(loose_modes(root))
    if not loose:
        return check("permissions", True, f"{root} and everything in it is private to its "
                      "owner (directories 0700, files 0600)")
    shown = ", ".join(f"{path} {mode:04o}" for path, mode in loose[:5])
    more = " ..." if len(loose) > 5 else ""
    # the configuration (object-store credentials) and the evidence keys are secrets: a
    # failure; anything else others can read (messages in the log and outbox) a warning
    secret = any(path.name == "nereus.toml" or "secrets" in path.relative_to(root).parts
                 for path, _ in loose if path != root)
    return check("permissions", False, f"readable by other users: {shown}{more}",
                  f"chmod -R go-rwx {root}  (nereus.toml can hold object-store secrets; the "
                  "log, database and outbox hold your messages)",
                  severity="error" if secret else "warning")


def _object_store(env: Env) -> DoctorCheck:
    from nereus.errors import NereusError

    try:
        store = env.object_store()
        list(store.list("catalog/"))
    except NereusError as exc:
        return check("object_store", False, exc.message, "check [objects] in nereus.toml")
    except Exception as exc:
        return check("object_store", False, f"{type(exc).__name__}: {exc}",
                      "check [objects] in nereus.toml and the credentials")
    return check("object_store", True, f"{store.description} answers")


def _clock(config: Config) -> DoctorCheck:
    from nereus.engine.process.engine_settings import EngineSettings
    from nereus.engine.runtime.trusted_clock import TrustedClock, read_chrony

    settings = EngineSettings.from_config(config.engine)
    report = read_chrony() if settings.chrony else None
    clock = TrustedClock(max_error_ms=settings.max_clock_error_ms,
                         health=(lambda: report) if report is not None else None)
    now = clock.now()
    if report is not None and report.problem is not None:
        return check("clock", False, f"Trusted UTC is not trusted: {report.problem}; the "
                      "engine admits nothing until it is",
                      "synchronise the clock (chronyc tracking, chronyc sources)")
    source = f"chrony adds {report.error_ms} ms" if report is not None \
        else "configured bound only"
    return check("clock", True, f"Trusted UTC uncertainty ±{now.uncertainty_ms // 2} ms "
                  f"({source}); work is never early, at most this late")


def _uncertain(env: Env, config: Config, after_ms: int) -> DoctorCheck:
    """Attempts UNKNOWN (their messages UNCERTAIN) since longer than ``after_ms`` after their
    admission: asked of the running engine, else read from each shard's database
    (read-only). Such an attempt waits for an operator: nothing settles it on its own."""
    import time

    from nereus.timespec import format_duration_ms, parse_time_ms

    now = time.time_ns() // 1_000_000
    found: list[tuple[int, str, str]] = []  # (admitted ms, what to say, lane)
    if env.engine_running():
        from nereus.errors import NereusError

        try:
            listed = env.admin().get("/v1/attempts", state="unknown",
                                     limit=UNCERTAIN_LISTED)["attempts"]
        except NereusError as exc:  # the engine check says why it does not answer
            return check("uncertain", False, f"not checked: {exc.message}",
                          "see the engine check", severity="warning")
        for attempt in listed:
            at = attempt.get("admitted_at")
            found.append((parse_time_ms(at) if at else now,
                          f"{attempt['attempt_id']} (message {attempt['delay_message_id']}, "
                          f"lane {attempt['lane']}, {attempt['shard']})", attempt["lane"]))
    else:
        found = _offline_unknown(env, config)
    old = sorted((at, what) for at, what, _ in found if now - at > after_ms)
    limit = format_duration_ms(after_ms)
    if not found:
        return check("uncertain", True, "no attempt UNCERTAIN")
    if not old:  # not overdue yet, but worth knowing: a warning naming the lanes
        lanes = Counter(lane for _, _, lane in found)
        oldest = format_duration_ms(now - min(at for at, _, _ in found))
        return check("uncertain", False, f"{len(found)} attempt(s) UNCERTAIN, none for longer "
                      f"than {limit} (oldest {oldest}), on lane(s) " + ", ".join(
                          f"{lane} ({n})" for lane, n in sorted(lanes.items())),
                      "evidence recovery settles those whose record it finds; a lane with "
                      "`fencing` settles a dead owner's at its next recovery; the rest need "
                      "an operator: the settle-lane-uncertain playbook settles a lane's in "
                      "bulk", severity="warning")
    shown = "; ".join(f"{what} since {format_duration_ms(now - at)}"
                      for at, what in old[:UNCERTAIN_SHOWN])
    more = f" and {len(old) - UNCERTAIN_SHOWN} more" if len(old) > UNCERTAIN_SHOWN else ""
    return check("uncertain", False, f"{len(old)} attempt(s) UNCERTAIN for longer than "
                  f"{limit}: {shown}{more}",
                  "find the destination's evidence and settle each with `nereus attempt "
                  "resolve ATTEMPT (--published | --not-published) --evidence ... --reason "
                  "...`, or run the resolve-uncertain playbook (settle-lane-uncertain: a "
                  "lane's in bulk)")


def _fencing(config: Config) -> DoctorCheck:
    """Which lanes leave a dead owner's in-flight attempts UNCERTAIN (no ``fencing``): a
    warning naming them (docs/rules.md §10)."""
    unfenced = [f"{lane.name} ({lane.destination})" for lane in config.lanes.values()
                if lane.fencing_kind is None]
    fenced = ", ".join(f"{lane.name}: {lane.fencing_kind}" for lane in config.lanes.values()
                       if lane.fencing_kind is not None)
    if not unfenced:
        return check("fencing", True, f"every lane fences a dead owner's sends ({fenced})"
                     if fenced else "no lane configured")
    return check("fencing", False, "after a crash, in-flight attempts stay UNCERTAIN on "
                 f"lane(s) {', '.join(unfenced)}: they do not fence a dead owner's sends",
                 "set `fencing = true` on the lane where the site allows it (kafka: "
                 "transactions, and consumers reading read_committed; pulsar: deduplication "
                 "on the topic)", severity="warning")


def _offline_unknown(env: Env, config: Config) -> list[tuple[int, str, str]]:
    """Every UNKNOWN attempt of the home's shards, from their databases read-only."""
    from nereus.errors import StoreError
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore
    from nereus.views import open_attempts

    found: list[tuple[int, str, str]] = []
    for route in config.routes.values():
        for partition in range(route.partitions):
            shard = ShardId(route.name, partition)
            path = env.layout.shard_state(shard)
            if not (path / "CURRENT").exists():
                continue
            try:
                with ShardStore.open(path, read_only=True) as store:
                    found += [(attempt.admitted_broker_ms,
                               f"{attempt.attempt_id} (message {attempt.delay_message_id}, "
                               f"lane {attempt.lane}, {shard})", attempt.lane)
                              for attempt in open_attempts(store, state="UNKNOWN")]
            except StoreError:
                continue
    return found
