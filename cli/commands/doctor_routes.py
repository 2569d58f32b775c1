"""The doctor's checks of each route and lane: the Command Topic and the services a route
names, lanes without configuration, and the continuity of each shard's state and log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nereus.cli.context import Env

if TYPE_CHECKING:
    from nereus.adapters.backends.kafka.kafka_log import KafkaShardLog
    from nereus.cli.setup_documents import DoctorCheck
    from nereus.config import Config, RouteSettings


def check(name: str, ok: bool, detail: str, fix: str | None = None, *,
           severity: str = "error") -> DoctorCheck:
    """One check. A failed ``warning`` is reported but does not fail the doctor."""
    from nereus.cli.setup_documents import DoctorCheck

    return DoctorCheck(name=name, ok=ok, severity=severity, detail=detail,
                       fix=None if ok else fix)


def command_topic(env: Env, route: RouteSettings, silent: set[str]) -> list[DoctorCheck]:
    """A Kafka Command Topic keeps what recovery needs: replicated (warn below 3 replicas
    and min.insync.replicas 2), and retention never below the Recovery Floor. Not asked
    when its broker's check (in ``silent``: the services that did not answer) failed: the
    log's clients would wait their own 30 s for the same answer."""
    from nereus.adapters.backends.kafka.kafka_log import KafkaShardLog
    from nereus.adapters.backends.shardlog.factory import DEFAULT_KAFKA_BOOTSTRAP, command_topic
    from nereus.errors import NereusError

    topic = command_topic(route)
    name = f"command_topic {topic}"
    bootstrap = route.bootstrap or DEFAULT_KAFKA_BOOTSTRAP
    if f"kafka {bootstrap}" in silent:
        return [check(name, False, f"not checked: Kafka at {bootstrap} did not answer "
                       f"(check kafka {bootstrap})", "start Kafka, or fix the route's bootstrap",
                       severity="warning")]
    checks: list[DoctorCheck] = []
    try:
        logs = [KafkaShardLog(bootstrap, topic, p,
                              partitions=route.partitions, create=False)
                for p in range(route.partitions)]
    except NereusError as exc:
        return [check(name, False, exc.message, exc.hint or "start Kafka, or fix the route")]
    try:
        settings = logs[0].topic_config()
        factor = logs[0].replication_factor()
        in_sync = int(settings.get("min.insync.replicas", "1"))
        durable = factor >= 3 and in_sync >= 2
        checks.append(check(
            f"{name} replication", durable,
            f"replication factor {factor}, min.insync.replicas {in_sync}" + (
                "" if durable else ": losing one broker can lose acknowledged commands"),
            "on a cluster of 3 or more brokers use replication_factor = 3 and "
            "min_insync_replicas = 2 (a new topic gets them by default)", severity="warning"))
        retention = int(settings.get("retention.ms", "-1"))
        if retention < 0:
            checks.append(check(f"{name} retention", True, "retention.ms=-1: every record "
                                 "is kept (prune below the Recovery Floor with shard prune)"))
            return checks
        problems = _floor_problems(env, route, logs, retention)
        checks.append(check(
            f"{name} retention", not problems,
            "; ".join(problems) or f"retention.ms={retention} keeps the Recovery Floor",
            "take a checkpoint (nereus checkpoint create) to raise the floor, or set "
            "retention_ms = -1 for the route"))
    except NereusError as exc:
        checks.append(check(name, False, exc.message, exc.hint))
    finally:
        for log in logs:
            log.close()
    return checks


def _floor_problems(env: Env, route: RouteSettings, logs: list[KafkaShardLog],
                    retention: int) -> list[str]:
    """Each partition whose records at the Recovery Floor Kafka deleted or deletes soon."""
    import time

    from nereus.adapters.offline.checkpoint_catalog import recovery_floor
    from nereus.shard import ShardId

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
    return problems


def unconfigured_lanes(env: Env, config: Config) -> DoctorCheck:
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
        return check("lanes", True, "every lane with messages is configured",
                      severity="warning")
    listed = ", ".join(f"{name} ({n} unfinished)" for name, n in sorted(waiting.items()))
    return check("lanes", False, f"messages wait on unconfigured lanes: {listed}",
                  f"add [lanes.NAME] to {config.source} for each (or cancel those messages)",
                  severity="warning")


def log_continuity(env: Env, config: Config) -> list[DoctorCheck]:
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
                checks.append(check(name, False, exc.message, exc.hint))
                continue
            except Exception as exc:  # a broker that does not answer: reported above
                detail = exc.message if isinstance(exc, NereusError) else \
                    f"{type(exc).__name__}: {exc}"
                checks.append(check(name, False, f"cannot compare the log with the state: "
                                     f"{detail}", "make the log readable and run doctor again",
                                     severity="warning"))
                continue
            checks.append(check(name, True, "nothing applied yet" if applied is None else
                                 f"the log holds the applied position {applied}"))
    return checks


def _kafka(bootstrap: str) -> tuple[str, str | None] | None:
    """Why Kafka at ``bootstrap`` does not answer or refuses us, with what to fix, or None.
    Asked quietly (``broker_probe``): an AdminClient's own log wrote a reconnect line to
    stderr every 50 ms while it waited."""
    from nereus.adapters.backends.kafka.kafka_probe import probe_kafka
    from nereus.errors import ConfigError, ServiceUnreachable

    try:
        probe_kafka(bootstrap, 4.0)
    except (ServiceUnreachable, ConfigError) as exc:
        return exc.message, exc.hint
    return None


def _pulsar_admin(admin_url: str) -> tuple[str, str | None] | None:
    """Why the Pulsar admin API does not answer or refuses us, with what to fix, or None
    (with the token and CA of the ``[pulsar.NAME]`` that names it)."""
    from nereus.adapters.backends.pulsar.pulsar_client import admin_request
    from nereus.errors import NereusError

    try:
        admin_request(admin_url, "GET", "admin/v2/clusters", timeout_s=4)
    except NereusError as exc:
        return exc.message, exc.hint
    return None


def service_checks(config: Config) -> list[DoctorCheck]:
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
        problem = _kafka(target) if kind == "kafka" else _pulsar_admin(target)
        detail, fix = problem or ("answers", None)
        checks.append(check(f"{kind} {target}", problem is None, detail,
                            fix or f"start it (scripts/services up {kind}) or fix the address"))
    return checks
