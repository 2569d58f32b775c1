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
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.setup_documents import DoctorCheck
    from nereus.config import Config, RouteSettings

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


def _check(name: str, ok: bool, detail: str, fix: str | None = None, *,
           severity: str = "error") -> DoctorCheck:
    """One check. A failed ``warning`` is reported but does not fail the doctor."""
    from nereus.cli.setup_documents import DoctorCheck

    return DoctorCheck(name=name, ok=ok, severity=severity, detail=detail,
                       fix=None if ok else fix)


def _command_topic(env: Env, route: RouteSettings, silent: set[str]) -> list[DoctorCheck]:
    """A Kafka Command Topic keeps what recovery needs: replicated (warn below 3 replicas
    and min.insync.replicas 2), and retention never below the Recovery Floor. Not asked
    when its broker's check (in ``silent``: the services that did not answer) failed: the
    log's clients would wait their own 30 s for the same answer."""
    import time

    from nereus.adapters.backends.kafka.kafka_log import KafkaShardLog
    from nereus.adapters.backends.shardlog.factory import DEFAULT_KAFKA_BOOTSTRAP, command_topic
    from nereus.adapters.offline.checkpoint_catalog import recovery_floor
    from nereus.errors import NereusError
    from nereus.shard import ShardId

    topic = command_topic(route)
    name = f"command_topic {topic}"
    bootstrap = route.bootstrap or DEFAULT_KAFKA_BOOTSTRAP
    if f"kafka {bootstrap}" in silent:
        return [_check(name, False, f"not checked: Kafka at {bootstrap} did not answer "
                       f"(check kafka {bootstrap})", "start Kafka, or fix the route's bootstrap",
                       severity="warning")]
    checks: list[DoctorCheck] = []
    try:
        logs = [KafkaShardLog(bootstrap, topic, p,
                              partitions=route.partitions, create=False)
                for p in range(route.partitions)]
    except NereusError as exc:
        return [_check(name, False, exc.message, exc.hint or "start Kafka, or fix the route")]
    try:
        settings = logs[0].topic_config()
        factor = logs[0].replication_factor()
        in_sync = int(settings.get("min.insync.replicas", "1"))
        durable = factor >= 3 and in_sync >= 2
        checks.append(_check(
            f"{name} replication", durable,
            f"replication factor {factor}, min.insync.replicas {in_sync}" + (
                "" if durable else ": losing one broker can lose acknowledged commands"),
            "on a cluster of 3 or more brokers use replication_factor = 3 and "
            "min_insync_replicas = 2 (a new topic gets them by default)", severity="warning"))
        retention = int(settings.get("retention.ms", "-1"))
        if retention < 0:
            checks.append(_check(f"{name} retention", True, "retention.ms=-1: every record "
                                 "is kept (prune below the Recovery Floor with shard prune)"))
            return checks
        objects = env.object_store()
        now = time.time_ns() // 1_000_000
        problems: list[str] = []
        for partition, log in enumerate(logs):
            shard = ShardId(route.name, partition)
            floor = recovery_floor(objects, shard, env.config.checkpoints.keep).position
            start = log.start_position()
            if start > floor:
                problems.append(f"{shard}: Kafka already deleted records {floor}..{start - 1} "
                                "that the Recovery Floor needs")
                continue
            head = log.read(floor, 1)
            if head and now - head[0].broker_ms > retention * 0.8:
                age_h = (now - head[0].broker_ms) / 3_600_000
                problems.append(f"{shard}: the record at the Recovery Floor ({floor}) is "
                                f"{age_h:.1f} h old; retention.ms={retention} deletes it soon")
        checks.append(_check(
            f"{name} retention", not problems,
            "; ".join(problems) or f"retention.ms={retention} keeps the Recovery Floor",
            "take a checkpoint (nereus checkpoint create) to raise the floor, or set "
            "retention_ms = -1 for the route"))
    except NereusError as exc:
        checks.append(_check(name, False, exc.message, exc.hint))
    finally:
        for log in logs:
            log.close()
    return checks


def _unconfigured_lanes(env: Env, config: Config) -> DoctorCheck:
    """Lanes that hold unfinished messages but have no [lanes.NAME]: never published."""
    from nereus.errors import StoreError
    from nereus.shard import ShardId
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Lane, decode_value

    waiting: dict[str, int] = {}
    for route in config.routes.values():
        for partition in range(route.partitions):
            path = env.layout.shard_state(ShardId(route.name, partition))
            if not (path / "CURRENT").exists():
                continue
            try:
                with ShardStore.open(path, read_only=True) as store:
                    for _, raw in store.scan_prefix(keys.LANE):
                        lane = decode_value(raw, Lane)
                        pending = sum(lane.counts.get(s, 0)
                                      for s in ("SCHEDULED", "PUBLISHING", "UNCERTAIN"))
                        if pending and lane.name not in config.lanes:
                            waiting[lane.name] = waiting.get(lane.name, 0) + pending
            except StoreError:
                continue
    if not waiting:
        return _check("lanes", True, "every lane with messages is configured",
                      severity="warning")
    listed = ", ".join(f"{name} ({n} unfinished)" for name, n in sorted(waiting.items()))
    return _check("lanes", False, f"messages wait on unconfigured lanes: {listed}",
                  f"add [lanes.NAME] to {config.source} for each (or cancel those messages)",
                  severity="warning")


def _log_continuity(env: Env, config: Config) -> list[DoctorCheck]:
    """Each shard's Shard Log still holds the record its state applied last (a log that
    ends before it, or holds other bytes there, has diverged: the shard must be recovered).
    Databases are opened read-only, so this works beside a running engine."""
    from nereus.adapters.offline.continuity_checks import check_log_end, check_shard
    from nereus.errors import LogDiverged, NereusError, NotFound
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore

    checks: list[DoctorCheck] = []
    for route in config.routes.values():
        for partition in range(route.partitions):
            shard = ShardId(route.name, partition)
            path = env.layout.shard_state(shard)
            if not (path / "CURRENT").exists():
                continue
            name = f"shard_log {shard}"
            try:
                with ShardStore.open(path, read_only=True) as store:
                    applied = store.applied_position()
                    try:
                        log = env.shard_log(shard, create=False)
                    except NotFound:  # no log directory at all: it ends at position 0
                        check_log_end(shard, applied, 0, path)
                    else:
                        problem = check_shard(shard, store, log, path)
                        if problem is not None:
                            raise problem
            except LogDiverged as exc:
                checks.append(_check(name, False, exc.message, exc.hint))
                continue
            except Exception as exc:  # a broker that does not answer: reported above
                detail = exc.message if isinstance(exc, NereusError) else \
                    f"{type(exc).__name__}: {exc}"
                checks.append(_check(name, False, f"cannot compare the log with the state: "
                                     f"{detail}", "make the log readable and run doctor again",
                                     severity="warning"))
                continue
            checks.append(_check(name, True, "nothing applied yet" if applied is None else
                                 f"the log holds the applied position {applied}"))
    return checks


def _kafka(bootstrap: str) -> str | None:
    """Why Kafka at ``bootstrap`` does not answer, or None. Asked quietly
    (``broker_probe``): an AdminClient's own log wrote a reconnect line to stderr every
    50 ms while it waited."""
    from nereus.adapters.backends.kafka.kafka_probe import probe_kafka
    from nereus.errors import ServiceUnreachable

    try:
        probe_kafka(bootstrap, 4.0)
    except ServiceUnreachable as exc:
        return exc.message
    return None


def _http(url: str) -> str | None:
    import urllib.request  # here, not at the top: ~20 ms on every `nereus` call

    try:
        with urllib.request.urlopen(url, timeout=4) as answer:
            answer.read(1)
    except Exception as exc:
        return f"no answer from {url}: {exc}"
    return None


def _services(config: Config) -> list[DoctorCheck]:
    from nereus.adapters.backends.shardlog.factory import (
        DEFAULT_KAFKA_BOOTSTRAP,
        DEFAULT_PULSAR_ADMIN,
    )

    checks = []
    seen: set[tuple[str, str]] = set()
    for route in config.routes.values():
        if route.log == "kafka":
            target = route.bootstrap or DEFAULT_KAFKA_BOOTSTRAP
            seen.add(("kafka", target))
        elif route.log == "pulsar":
            target = route.admin_url or DEFAULT_PULSAR_ADMIN
            seen.add(("pulsar", target))
    for lane in config.lanes.values():
        if lane.destination == "kafka":
            seen.add(("kafka", lane.bootstrap or DEFAULT_KAFKA_BOOTSTRAP))
        elif lane.destination == "pulsar":
            seen.add(("pulsar", lane.admin_url or DEFAULT_PULSAR_ADMIN))
    for kind, target in sorted(seen):
        problem = _kafka(target) if kind == "kafka" else _http(
            target.rstrip("/") + "/admin/v2/clusters")
        checks.append(_check(f"{kind} {target}", problem is None, problem or "answers",
                             "start it (scripts/services up " + kind + ") or fix the address"))
    return checks


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
        checks.append(_check("config", True, f"{layout.config} is valid: "
                             f"{len(config.routes)} route(s), {len(config.lanes)} lane(s)"))
    except NereusError as exc:
        checks.append(_check("config", False, exc.message, exc.hint or "fix nereus.toml"))
    if layout.root.is_dir():
        writable = os.access(layout.root, os.W_OK)
        checks.append(_check("home", writable, f"{layout.root} is "
                             f"{'writable' if writable else 'NOT writable'}",
                             f"chown/chmod {layout.root} for this user"))
    else:
        checks.append(_check("home", False, f"{layout.root} does not exist",
                             "run `nereus init`"))
    sock = layout.run / "admin.sock"
    if sock.exists():
        mode = stat.S_IMODE(sock.stat().st_mode)
        checks.append(_check("admin_socket", mode == 0o600,
                             f"{sock} mode {mode:04o}", f"chmod 600 {sock}"))
    checks.append(_engine(env))
    if config is not None:
        checks.append(_uncertain(env, config, after_ms))
    if layout.root.is_dir():
        checks.append(_privacy(layout.root))
    if layout.root.is_dir():
        usage = shutil.disk_usage(layout.root)
        checks.append(_check("disk", usage.free >= MIN_FREE_BYTES,
                             f"{_bytes(usage.free)} free of {_bytes(usage.total)}",
                             "free space: logs, state and checkpoints need room to grow"))
    if config is not None:
        services = _services(config)
        checks.extend(services)
        checks.append(_object_store(env))
        checks.append(_clock(config))
        checks.append(_unconfigured_lanes(env, config))
        checks.extend(_log_continuity(env, config))
        silent = {c.name for c in services if not c.ok}
        for route in config.routes.values():
            if route.log == "kafka":
                checks.extend(_command_topic(env, route, silent))
    ok = all(c.ok or c.severity == "warning" for c in checks)
    data = msgspec.to_builtins(DoctorReport(ok=ok, home=str(layout.root), checks=checks))

    def human(out: Console) -> None:
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

    env.output.emit(data, human)
    if not ok:
        raise Answered(ExitCode.NO)


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
        return _check("engine", True, "the engine is not running")
    pid = lock_holder(env.home)
    written = read_pid(env.home)
    missing = [f"its admin socket {socket_path(env.home)}"] \
        if not socket_path(env.home).exists() else []
    if written is None:
        missing.append(f"its pid file {pid_file(env.home)}")
    elif pid is not None and written != pid:
        missing.append(f"its pid file (which names pid {written})")
    if missing:
        return _check("engine", False, f"the engine (pid {pid or '?'}) runs without "
                      + " and without ".join(missing),
                      "if it is starting, wait for it; else `nereus engine logs --level error` "
                      "says why, and `nereus engine stop` then `nereus engine start` give it "
                      "back its files")
    try:
        status = env.admin().get("/v1/status")
    except NereusError as exc:
        return _check("engine", False, f"the engine runs but its status failed: {exc.message}",
                      "see <home>/log/engine.log; restart it with `nereus engine stop` and "
                      "`nereus engine start`")
    problems = status.get("problems", [])
    if problems:
        return _check("engine", False, "the engine is running, not healthy: "
                      + "; ".join(problems),
                      "`nereus engine status` and <home>/log/engine.log say why; fix the "
                      "cause (a shard log that ends before its database: restore the shard "
                      "from its Recovery Set), then restart the engine")
    return _check("engine", True, f"the engine is running: {len(status['shards'])} shard(s) "
                  f"and {len(status['workers'])} worker(s) healthy")


def _privacy(root: Path) -> DoctorCheck:
    """The home is 0700 and its files 0600: nothing in it for other users of the host."""
    from nereus.adapters.home.private_files import loose_modes

    loose = list(loose_modes(root))
    if not loose:
        return _check("permissions", True, f"{root} and everything in it is private to its "
                      "owner (directories 0700, files 0600)")
    shown = ", ".join(f"{path} {mode:04o}" for path, mode in loose[:5])
    more = " ..." if len(loose) > 5 else ""
    # the configuration (object-store credentials) and the evidence keys are secrets: a
    # failure; anything else others can read (messages in the log and outbox) a warning
    secret = any(path.name == "nereus.toml" or "secrets" in path.relative_to(root).parts
                 for path, _ in loose if path != root)
    return _check("permissions", False, f"readable by other users: {shown}{more}",
                  f"chmod -R go-rwx {root}  (nereus.toml can hold object-store secrets; the "
                  "log, database and outbox hold your messages)",
                  severity="error" if secret else "warning")


def _object_store(env: Env) -> DoctorCheck:
    from nereus.errors import NereusError

    try:
        store = env.object_store()
        list(store.list("catalog/"))
    except NereusError as exc:
        return _check("object_store", False, exc.message, "check [objects] in nereus.toml")
    except Exception as exc:
        return _check("object_store", False, f"{type(exc).__name__}: {exc}",
                      "check [objects] in nereus.toml and the credentials")
    return _check("object_store", True, f"{store.description} answers")


def _clock(config: Config) -> DoctorCheck:
    from nereus.engine.process.home_engine import EngineSettings
    from nereus.engine.runtime.trusted_clock import TrustedClock, read_chrony

    settings = EngineSettings.from_config(config.engine)
    report = read_chrony() if settings.chrony else None
    clock = TrustedClock(max_error_ms=settings.max_clock_error_ms,
                         health=(lambda: report) if report is not None else None)
    now = clock.now()
    if report is not None and report.problem is not None:
        return _check("clock", False, f"Trusted UTC is not trusted: {report.problem}; the "
                      "engine admits nothing until it is",
                      "synchronise the clock (chronyc tracking, chronyc sources)")
    source = f"chrony adds {report.error_ms} ms" if report is not None \
        else "configured bound only"
    return _check("clock", True, f"Trusted UTC uncertainty ±{now.uncertainty_ms // 2} ms "
                  f"({source}); work is never early, at most this late")


def _uncertain(env: Env, config: Config, after_ms: int) -> DoctorCheck:
    """Attempts UNKNOWN (their messages UNCERTAIN) since longer than ``after_ms`` after their
    admission: asked of the running engine, else read from each shard's database
    (read-only). Such an attempt waits for an operator: nothing settles it on its own."""
    import time

    from nereus.timespec import format_duration_ms, parse_time_ms

    now = time.time_ns() // 1_000_000
    found: list[tuple[int, str]] = []  # (admitted ms, what to say)
    if env.engine_running():
        from nereus.errors import NereusError

        try:
            listed = env.admin().get("/v1/attempts", state="unknown",
                                     limit=UNCERTAIN_LISTED)["attempts"]
        except NereusError as exc:  # the engine check says why it does not answer
            return _check("uncertain", False, f"not checked: {exc.message}",
                          "see the engine check", severity="warning")
        for attempt in listed:
            at = attempt.get("admitted_at")
            found.append((parse_time_ms(at) if at else now,
                          f"{attempt['attempt_id']} (message {attempt['delay_message_id']}, "
                          f"lane {attempt['lane']}, {attempt['shard']})"))
    else:
        found = _offline_unknown(env, config)
    old = sorted((at, what) for at, what in found if now - at > after_ms)
    limit = format_duration_ms(after_ms)
    if not old:
        return _check("uncertain", True, f"no attempt UNCERTAIN for longer than {limit}"
                      + (f" ({len(found)} newer)" if found else ""))
    shown = "; ".join(f"{what} since {format_duration_ms(now - at)}"
                      for at, what in old[:UNCERTAIN_SHOWN])
    more = f" and {len(old) - UNCERTAIN_SHOWN} more" if len(old) > UNCERTAIN_SHOWN else ""
    return _check("uncertain", False, f"{len(old)} attempt(s) UNCERTAIN for longer than "
                  f"{limit}: {shown}{more}",
                  "find the destination's evidence and settle each with `nereus attempt "
                  "resolve ATTEMPT (--published | --not-published) --evidence ... --reason "
                  "...`, or run the resolve-uncertain playbook")


def _offline_unknown(env: Env, config: Config) -> list[tuple[int, str]]:
    """Every UNKNOWN attempt of the home's shards, from their databases read-only."""
    from nereus.errors import StoreError
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore
    from nereus.views import open_attempts

    found: list[tuple[int, str]] = []
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
                               f"lane {attempt.lane}, {shard})")
                              for attempt in open_attempts(store, state="UNKNOWN")]
            except StoreError:
                continue
    return found
