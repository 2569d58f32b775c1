"""Reading ``nereus.toml``: ``parse_config`` converts each table strictly to its Struct and
checks what no field type can say (names, ids, durations, a file lane's path, an s3 store's
bucket, the lease margin, the metrics address); ``tables_of`` names a text's tables.

Every refusal is a ``ConfigError`` worded by ``nereus.config.explain``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from typing import TypeVar

import msgspec

from nereus.config.document import TABLE_TYPES, Config
from nereus.config.engine import EngineConfig
from nereus.config.explain import did_you_mean, error_at, explain, line_of
from nereus.config.lanes import LaneSettings
from nereus.config.node import LISTEN, ClusterSettings, MetricsSettings
from nereus.config.routes import RouteSettings
from nereus.config.storage import CheckpointSettings, ObjectSettings
from nereus.errors import ConfigError, UsageError
from nereus.machine.limits import Limits
from nereus.machine.validate import LANE_NAME
from nereus.shard import validate_route_name

_Table = TypeVar("_Table", bound=msgspec.Struct)


def _convert(data: object, kind: type[_Table], table: str, text: str, source: str) -> _Table:
    """The TOML table ``data`` as ``kind``; a ConfigError naming the table, key and line."""
    if not isinstance(data, dict):
        raise error_at(text, source, table, None, "must be a table")
    try:
        return msgspec.convert(data, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise explain(exc, table, kind, data, text, source) from None


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
    routes: dict[str, RouteSettings] = {}
    for name, table in _group(data, "routes", text, source).items():
        where = f"routes.{name}"
        try:
            validate_route_name(name)
        except Exception as exc:
            raise error_at(text, source, where, None, str(exc)) from None
        _no_name_key(table, where, text, source)
        route: RouteSettings = _convert(table, RouteSettings, where, text, source)
        if route.id and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", route.id):
            raise error_at(text, source, where, "id",
                           f"id = {route.id!r}: expected 1-64 of A-Z a-z 0-9 . _ -")
        if route.min_insync_replicas is not None and route.replication_factor is not None \
                and route.min_insync_replicas > route.replication_factor:
            raise error_at(text, source, where, "min_insync_replicas",
                           f"min_insync_replicas = {route.min_insync_replicas} is more than "
                           f"replication_factor = {route.replication_factor}")
        try:
            route.dedup_window_ms  # noqa: B018 - a duration, or the file is refused here
        except UsageError as exc:
            raise error_at(text, source, where, "dedup_window", exc.message) from None
        routes[name] = msgspec.structs.replace(route, name=name)
    lanes: dict[str, LaneSettings] = {}
    for name, table in _group(data, "lanes", text, source).items():
        where = f"lanes.{name}"
        if not LANE_NAME.match(name):
            raise error_at(text, source, where, None,
                           "lane names are 1-64 of A-Z a-z 0-9 . _ - starting with a letter or "
                           "digit")
        _no_name_key(table, where, text, source)
        lane: LaneSettings = _convert(table, LaneSettings, where, text, source)
        if lane.destination == "file" and lane.path is None:
            raise error_at(text, source, where, "path", "a file lane needs path = \"...\"")
        for duration in ("max_delay", "retention", "dedup_window"):
            try:
                getattr(lane, f"{duration}_ms")  # a duration, or the file is refused here
            except UsageError as exc:
                raise error_at(text, source, where, duration, exc.message) from None
        if lane.handoff == "deliver_at" and lane.destination != "pulsar":
            raise error_at(text, source, where, "handoff",
                           f"handoff = \"deliver_at\" needs a destination that holds messages "
                           f"until deliverAt (pulsar), not {lane.destination}")
        lanes[name] = msgspec.structs.replace(lane, name=name)
    limits: Limits = _convert(data.get("shard", {}), Limits, "shard", text, source)
    engine: EngineConfig = _convert(data.get("engine", {}), EngineConfig, "engine", text, source)
    try:
        engine.payload_gc_interval_s  # noqa: B018 - a duration, or the file is refused here
    except UsageError as exc:
        raise error_at(text, source, "engine", "payload_gc_interval", exc.message) from None
    objects: ObjectSettings = _convert(data.get("objects", {}), ObjectSettings, "objects", text,
                                       source)
    checkpoints: CheckpointSettings = _convert(data.get("checkpoints", {}), CheckpointSettings,
                                               "checkpoints", text, source)
    if objects.store == "s3" and not objects.bucket:
        raise error_at(text, source, "objects", "bucket",
                       "an s3 object store needs bucket = \"...\"")
    cluster: ClusterSettings | None = None
    if "cluster" in data:
        cluster = _convert(data["cluster"], ClusterSettings, "cluster", text, source)
        if cluster.lease_margin_ms * 2 > cluster.session_ttl_ms:
            raise error_at(text, source, "cluster", "lease_margin_ms",
                           f"lease_margin_ms = {cluster.lease_margin_ms} is more than half of "
                           f"session_ttl_ms = {cluster.session_ttl_ms}: a node would stop "
                           "publishing between heartbeats")
    metrics: MetricsSettings = _convert(data.get("metrics", {}), MetricsSettings, "metrics",
                                        text, source)
    if metrics.listen is not None and (not LISTEN.fullmatch(metrics.listen)
                                       or not 0 < int(metrics.listen.rpartition(":")[2]) < 65_536):
        raise error_at(text, source, "metrics", "listen",
                       f"listen = {metrics.listen!r}: expected HOST:PORT with a port of 1-65535, "
                       'such as "127.0.0.1:9464" (an IPv6 host in brackets: "[::1]:9464")')
    return Config(routes, lanes, limits, source, engine, objects, checkpoints, cluster, metrics)


def tables_of(text: str, *, source: str) -> list[str]:
    """The top-level tables a nereus.toml text names (``ConfigError`` if it is not TOML)."""
    try:
        return list(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None


def _group(data: Mapping[str, object], name: str, text: str,
           source: str) -> dict[str, dict[str, object]]:
    """The tables of ``[name.*]`` (each ``[name.X]``, by X)."""
    group = data.get(name, {})
    if not isinstance(group, dict) or not all(isinstance(v, dict) for v in group.values()):
        raise error_at(text, source, None, None,
                       f"[{name}] holds tables: write [{name}.NAME] with its keys")
    return {str(key): table for key, table in group.items()}


def _no_name_key(table: Mapping[str, object], where: str, text: str, source: str) -> None:
    if "name" in table:
        raise error_at(text, source, where, "name",
                       "unknown key 'name' (the table's own name is the name)")
