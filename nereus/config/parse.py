"""Reading ``nereus.toml``: ``parse_config`` converts each table strictly to its Struct and
checks what no field type can say (names, ids, durations, a file lane's path, an s3 store's
bucket, the lease margin, the metrics address, the Kafka connections routes and lanes name,
secrets given as references, no user or password in an address); ``tables_of`` names a
text's tables.

Every refusal is a ``ConfigError`` worded by ``nereus.config.explain``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from typing import TypeVar

import msgspec

from nereus.config.connections import (
    ENV_NAME,
    KAFKA_SECRETS,
    PULSAR_SECRETS,
    SECRET_REFUSED,
    KafkaConnection,
    PulsarConnection,
    connection_problem,
    flatten,
    pulsar_problem,
)
from nereus.config.document import TABLE_TYPES, Config, FeatureSettings
from nereus.config.engine import EngineConfig
from nereus.config.explain import did_you_mean, error_at, explain, line_of
from nereus.config.lanes import LaneSettings
from nereus.config.node import LISTEN, ClusterSettings, MetricsSettings
from nereus.config.routes import RouteSettings
from nereus.config.storage import CheckpointSettings, ObjectSettings
from nereus.config.url_credentials import ADDRESS_KEYS, WHERE_CREDENTIALS_GO, has_credentials
from nereus.errors import ConfigError, UsageError
from nereus.machine.limits import Limits
from nereus.machine.validate import LANE_NAME
from nereus.shard import validate_route_name

_Table = TypeVar("_Table", bound=msgspec.Struct)
_Named = TypeVar("_Named", RouteSettings, LaneSettings)


class _Text:
    """The file being read: its text and name, for the line of every refusal."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source

    def error(self, table: str | None, key: str | None, message: str,
              hint: str | None = None) -> ConfigError:
        return error_at(self.text, self.source, table, key, message, hint)

    def convert(self, data: object, kind: type[_Table], table: str) -> _Table:
        """The TOML table ``data`` as ``kind``; a ConfigError naming the table, key and line."""
        if not isinstance(data, dict):
            raise self.error(table, None, "must be a table")
        try:
            return msgspec.convert(data, kind, strict=True)
        except msgspec.ValidationError as exc:
            raise explain(exc, table, kind, data, self.text, self.source) from None

    def duration(self, value: _Table, field: str, table: str, key: str) -> None:
        """``value.<field>`` is a duration, or the file is refused here."""
        try:
            getattr(value, field)
        except UsageError as exc:
            raise self.error(table, key, exc.message) from None


def parse_config(text: str, *, source: str = "nereus.toml") -> Config:
    """Parse and validate ``text`` (the content of ``source``)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    for name in data:
        if name not in TABLE_TYPES:
            line = line_of(text, name)
            where = f"{source}:{line}" if line else source
            raise ConfigError(f"{where}: unknown table [{name}]",
                              hint=did_you_mean(name, list(TABLE_TYPES)))
    file = _Text(text, source)
    kafka, pulsar = _kafka(data, file), _pulsar(data, file)
    routes = {name: _connected(_route(name, table, file), f"routes.{name}", kafka, pulsar, file)
              for name, table in _group(data, "routes", file).items()}
    lanes = {name: _connected(_lane(name, table, file), f"lanes.{name}", kafka, pulsar, file)
             for name, table in _group(data, "lanes", file).items()}
    limits: Limits = file.convert(data.get("shard", {}), Limits, "shard")
    engine: EngineConfig = file.convert(data.get("engine", {}), EngineConfig, "engine")
    file.duration(engine, "payload_gc_interval_s", "engine", "payload_gc_interval")
    objects = _objects(data.get("objects", {}), file)
    checkpoints: CheckpointSettings = file.convert(data.get("checkpoints", {}),
                                                   CheckpointSettings, "checkpoints")
    cluster = _cluster(data["cluster"], file) if "cluster" in data else None
    metrics = _metrics(data.get("metrics", {}), file)
    file.convert(data.get("features", {}), FeatureSettings, "features")  # checked, not kept
    return Config(routes, lanes, limits, source, engine, objects, checkpoints, cluster, metrics,
                  kafka, pulsar)


def _route(name: str, table: dict[str, object], file: _Text) -> RouteSettings:
    where = f"routes.{name}"
    try:
        validate_route_name(name)
    except Exception as exc:
        raise file.error(where, None, str(exc)) from None
    _no_name_key(table, where, file)
    _plain_addresses(table, where, file)
    route: RouteSettings = file.convert(table, RouteSettings, where)
    if route.id and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", route.id):
        raise file.error(where, "id", f"id = {route.id!r}: expected 1-64 of A-Z a-z 0-9 . _ -")
    if route.min_insync_replicas is not None and route.replication_factor is not None \
            and route.min_insync_replicas > route.replication_factor:
        raise file.error(where, "min_insync_replicas",
                         f"min_insync_replicas = {route.min_insync_replicas} is more than "
                         f"replication_factor = {route.replication_factor}")
    file.duration(route, "dedup_window_ms", where, "dedup_window")
    return msgspec.structs.replace(route, name=name)


def _lane(name: str, table: dict[str, object], file: _Text) -> LaneSettings:
    where = f"lanes.{name}"
    if not LANE_NAME.match(name):
        raise file.error(where, None, "lane names are 1-64 of A-Z a-z 0-9 . _ - starting with "
                         "a letter or digit")
    _no_name_key(table, where, file)
    _plain_addresses(table, where, file)
    lane: LaneSettings = file.convert(table, LaneSettings, where)
    if lane.destination == "file" and lane.path is None:
        raise file.error(where, "path", "a file lane needs path = \"...\"")
    for duration in ("max_delay", "retention", "dedup_window"):
        file.duration(lane, f"{duration}_ms", where, duration)
    if lane.handoff == "deliver_at" and lane.destination != "pulsar":
        raise file.error(where, "handoff",
                         f"handoff = \"deliver_at\" needs a destination that holds messages "
                         f"until deliverAt (pulsar), not {lane.destination}")
    return msgspec.structs.replace(lane, name=name)


def _kafka(data: Mapping[str, object], file: _Text) -> dict[str, KafkaConnection]:
    """The ``[kafka.NAME]`` connections; two naming one bootstrap must say the same."""
    connections = _tables(data, "kafka", KafkaConnection, KAFKA_SECRETS, connection_problem,
                          file)
    seen: dict[str, KafkaConnection] = {}
    for name, connection in connections.items():
        other = seen.setdefault(connection.bootstrap, connection)
        if msgspec.structs.replace(other, name=name) != connection:
            raise file.error(f"kafka.{name}", "bootstrap",
                             f"[kafka.{other.name}] names the same bootstrap "
                             f"{connection.bootstrap!r} with other settings",
                             hint="one cluster is one [kafka.NAME] table: name it from "
                                  "every route and lane that uses it")
    return connections


def _pulsar(data: Mapping[str, object], file: _Text) -> dict[str, PulsarConnection]:
    return _tables(data, "pulsar", PulsarConnection, PULSAR_SECRETS, pulsar_problem, file)


_Connection = TypeVar("_Connection", KafkaConnection, PulsarConnection)


def _tables(data: Mapping[str, object], group: str, kind: type[_Connection],
            secrets: tuple[tuple[str, str, str], ...],
            problem_of: Callable[[_Connection], tuple[str, str] | None],
            file: _Text) -> dict[str, _Connection]:
    """The ``[group.NAME]`` connection tables (dotted keys read as written), each with its
    secrets by reference and settings that work together."""
    connections: dict[str, _Connection] = {}
    for name, table in _group(data, group, file).items():
        where = f"{group}.{name}"
        flat = flatten(table)
        _no_name_key(flat, where, file)
        _plain_addresses(flat, where, file)
        _secret_refs(flat, kind, secrets, where, file, inline=False)
        connection = file.convert(flat, kind, where)
        problem = problem_of(connection)
        if problem is not None:
            raise file.error(where, problem[0], problem[1])
        connections[name] = msgspec.structs.replace(connection, name=name)
    return connections


def _connected(settings: _Named, where: str, kafka: Mapping[str, KafkaConnection],
               pulsar: Mapping[str, PulsarConnection], file: _Text) -> _Named:
    """``settings`` with the addresses of the ``[kafka.NAME]`` or ``[pulsar.NAME]`` it names
    (``kafka = NAME``: its bootstrap; ``pulsar = NAME``: its service and admin URLs)."""
    found_kafka = _named(settings, settings.kafka, "kafka", kafka, where, file)
    if found_kafka is not None:
        _same(settings.bootstrap, found_kafka.bootstrap, "bootstrap", settings.kafka, where, file)
        settings = msgspec.structs.replace(settings, bootstrap=found_kafka.bootstrap)
    found_pulsar = _named(settings, settings.pulsar, "pulsar", pulsar, where, file)
    if found_pulsar is not None:
        _same(settings.service_url, found_pulsar.service_url, "service_url", settings.pulsar,
              where, file)
        _same(settings.admin_url, found_pulsar.admin_url, "admin_url", settings.pulsar, where,
              file)
        settings = msgspec.structs.replace(settings, service_url=found_pulsar.service_url,
                                           admin_url=found_pulsar.admin_url
                                           or settings.admin_url)
    return settings


def _named(settings: RouteSettings | LaneSettings, name: str | None, kind: str,
           tables: Mapping[str, _Connection], where: str, file: _Text) -> _Connection | None:
    """The connection table ``settings`` names by its key ``kind`` (None when none)."""
    if name is None:
        return None
    route = isinstance(settings, RouteSettings)
    used = settings.log if isinstance(settings, RouteSettings) else settings.destination
    if used != kind:
        raise file.error(where, kind, f"{kind} = {name!r} names a {kind.capitalize()} "
                         f"connection, but this {'route logs to' if route else 'lane publishes to'}"
                         f" {used}")
    if name not in tables:
        raise file.error(where, kind, f"{kind} = {name!r}: no [{kind}.{name}] table",
                         did_you_mean(name, sorted(tables)))
    return tables[name]


def _same(given: str | None, table: str | None, key: str, name: str | None, where: str,
          file: _Text) -> None:
    if given is not None and table is not None and given != table:
        raise file.error(where, key, f"{key} = {given!r} is not the {key} of the table it "
                         f"names ({name})", hint="write the address once, in the connection's "
                                                 "table")


def _secret_refs(table: Mapping[str, object], kind: type[msgspec.Struct],
                 secrets: tuple[tuple[str, str, str], ...], where: str, file: _Text, *,
                 inline: bool) -> None:
    """Each secret of ``table`` given once, by a file or an environment variable (written
    inline only where ``inline`` allows it)."""
    names = {field.name: field.encode_name for field in msgspec.structs.fields(kind)}
    for key, by_file, by_env in secrets:
        file_key, env_key = names[by_file], names[by_env]
        given = [k for k in (key, file_key, env_key) if table.get(k) is not None]
        if key in table and not inline:
            raise file.error(where, key, f"{key} = ...: " + SECRET_REFUSED.format(key=key))
        if len(given) > 1:
            raise file.error(where, given[1], f"{' and '.join(given)} both give {key}: give it "
                             "once")
        env = table.get(env_key)
        if isinstance(env, str) and not ENV_NAME.fullmatch(env):
            raise file.error(where, env_key, f"{env_key} = {env!r}: expected the name of an "
                             "environment variable (A-Z a-z 0-9 _)")


def _plain_addresses(table: Mapping[str, object], where: str, file: _Text) -> None:
    """No address of ``table`` names a user or password (the value is never shown)."""
    for key in ADDRESS_KEYS:
        value = table.get(key)
        if isinstance(value, str) and has_credentials(value):
            raise file.error(where, key, f"{key} carries a user or password (USER:PASSWORD@):"
                             " a secret is not written into an address",
                             hint=WHERE_CREDENTIALS_GO if where == "cluster" else
                             "remove USER:PASSWORD@ and give the credentials by this table's "
                             "own settings, each secret as NAME_file = PATH or NAME_env = VAR "
                             "(docs/security.md)")


def _objects(data: object, file: _Text) -> ObjectSettings:
    if isinstance(data, dict):
        _plain_addresses(data, "objects", file)
        _secret_refs(data, ObjectSettings, (("secret_access_key", "secret_access_key_file",
                                             "secret_access_key_env"),), "objects", file,
                     inline=True)
    objects: ObjectSettings = file.convert(data, ObjectSettings, "objects")
    if objects.store == "s3" and not objects.bucket:
        raise file.error("objects", "bucket", "an s3 object store needs bucket = \"...\"")
    return objects


def _cluster(data: object, file: _Text) -> ClusterSettings:
    if isinstance(data, dict):
        _plain_addresses(data, "cluster", file)
        _secret_refs(data, ClusterSettings, (("password", "password_file", "password_env"),
                                             ("evidence_seal_key", "evidence_seal_key_file",
                                              "evidence_seal_key_env"),
                                             ("evidence_seal_previous_key",
                                              "evidence_seal_previous_key_file",
                                              "evidence_seal_previous_key_env")),
                     "cluster", file, inline=False)
    cluster: ClusterSettings = file.convert(data, ClusterSettings, "cluster")
    if (cluster.username is None) != (cluster.password_file is None
                                      and cluster.password_env is None):
        raise file.error("cluster", "username", "etcd's auth needs both username and "
                         "password_file (or password_env)")
    if (cluster.tls_cert_file is None) != (cluster.tls_key_file is None):
        raise file.error("cluster", "tls_cert_file", "a client certificate needs both "
                         "tls_cert_file and tls_key_file")
    if cluster.username is not None and cluster.coordinator.startswith("oxia:"):
        raise file.error("cluster", "username", "Oxia has no user/password auth: username "
                         "and password_file are for an etcd coordinator (Oxia: tls_ca_file, "
                         "tls_cert_file and tls_key_file)")
    if cluster.lease_margin_ms * 2 > cluster.session_ttl_ms:
        raise file.error("cluster", "lease_margin_ms",
                         f"lease_margin_ms = {cluster.lease_margin_ms} is more than half of "
                         f"session_ttl_ms = {cluster.session_ttl_ms}: a node would stop "
                         "publishing between heartbeats")
    return cluster


def _metrics(data: object, file: _Text) -> MetricsSettings:
    metrics: MetricsSettings = file.convert(data, MetricsSettings, "metrics")
    if metrics.listen is not None and (not LISTEN.fullmatch(metrics.listen)
                                       or not 0 < int(metrics.listen.rpartition(":")[2]) < 65_536):
        raise file.error("metrics", "listen",
                         f"listen = {metrics.listen!r}: expected HOST:PORT with a port of "
                         "1-65535, such as \"127.0.0.1:9464\" (an IPv6 host in brackets: "
                         "\"[::1]:9464\")")
    return metrics


def tables_of(text: str, *, source: str) -> list[str]:
    """The top-level tables a nereus.toml text names (``ConfigError`` if it is not TOML)."""
    try:
        return list(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None


def _group(data: Mapping[str, object], name: str, file: _Text) -> dict[str, dict[str, object]]:
    """The tables of ``[name.*]`` (each ``[name.X]``, by X)."""
    group = data.get(name, {})
    if not isinstance(group, dict) or not all(isinstance(v, dict) for v in group.values()):
        raise file.error(None, None, f"[{name}] holds tables: write [{name}.NAME] with its keys")
    return {str(key): table for key, table in group.items()}


def _no_name_key(table: Mapping[str, object], where: str, file: _Text) -> None:
    if "name" in table:
        raise file.error(where, "name", "unknown key 'name' (the table's own name is the name)")
