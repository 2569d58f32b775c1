"""``nereus.toml``: one typed schema, checked in one place, with file and line in every error.

::

    [routes.default]          # one route; its partitions are shards default/0 ...
    id = "..."                # the route's identity (nereus init writes it)
    log = "file"              # file (embedded) | kafka | pulsar
    partitions = 1

    [lanes.local]             # a destination lane
    destination = "file"
    path = "outbox/local.jsonl"   # relative to the home, or absolute

    [shard]                   # state machine limits (replay must use the same ones)
    max_inline_payload_bytes = 65536

Every table is a frozen msgspec Struct and the file is converted *strictly*: an unknown
key (with "did you mean" for a misspelt one), a wrong type (``chrony = "false"`` is a
string, not a boolean; ``max_in_flight = "lots"``) or a value out of its range
(``max_in_flight = 0``, ``quantum = 0``: nothing would ever publish; ``poll_interval_ms =
0``: a spinning core) is a ``ConfigError`` (exit 2) naming ``nereus.toml:LINE``, the key and
what was expected. The engine, the factories and the CLI read the typed values.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Final, Literal, TypeVar, get_args, get_type_hints

import msgspec

from nereus.errors import ConfigError, UsageError
from nereus.machine.limits import Limits
from nereus.machine.validate import LANE_NAME
from nereus.records.system import RouteIdentity
from nereus.shard import validate_route_name
from nereus.timespec import parse_duration_ms

LOG_BACKENDS: Final = ("file", "kafka", "pulsar")
DESTINATIONS: Final = ("file", "kafka", "pulsar")
DEFAULT_HANDOFF_LEAD_MS: Final = 1_000
DEFAULT_MAX_DELAY: Final = "400d"  # a lane's max_delay unless its table says otherwise
DEFAULT_RETENTION: Final = "7d"  # a lane's retention and dedup_window unless it says otherwise

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]


class RouteSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[routes.NAME]``: one ingress route; its partitions are its shards."""

    name: str = ""  # the table's name (filled in; not a key of the table)
    id: str = ""  # the route's identity, in the first record of each log partition
    log: Literal["file", "kafka", "pulsar"] = "file"
    partitions: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 1
    bootstrap: str | None = None  # kafka
    service_url: str | None = None  # pulsar
    admin_url: str | None = None  # pulsar
    topic: str | None = None  # the Command Topic (default nereus.<route>.commands)
    # a Kafka Command Topic keeps what recovery needs: -1 keeps every record (the default);
    # a bounded retention is compared with the Recovery Floor by `doctor`
    retention_ms: Annotated[int, msgspec.Meta(ge=-1)] = -1
    replication_factor: Positive | None = None  # default: min(3, brokers)
    min_insync_replicas: Positive | None = None  # default: min(2, replication factor)
    # how long a result of a record without a lane window (barriers, checkpoint marks,
    # operator mutations, payload stages, query barriers, a command naming no message) and a
    # rejected record's result answer a retry; the engine replicates it into each shard
    # (SHARD_RETENTION, docs/rules.md §5); "0s" keeps them for ever
    dedup_window: str = DEFAULT_RETENTION

    @property
    def route_id(self) -> str:
        return self.id

    @property
    def dedup_window_ms(self) -> int:
        """``dedup_window`` in milliseconds (checked when the file is read)."""
        return parse_duration_ms(self.dedup_window, field="dedup_window")

    def identity(self, partition: int) -> RouteIdentity:
        """The ROUTE_IDENTITY the first record of partition ``partition`` must be."""
        return RouteIdentity(route_id=self.id, route=self.name, partition=partition,
                             partitions=self.partitions)


class LaneSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[lanes.NAME]``: a destination lane."""

    name: str = ""  # the table's name (filled in; not a key of the table)
    destination: Literal["file", "kafka", "pulsar"]
    path: str | None = None  # file: relative to the home, or absolute
    topic: str | None = None  # kafka, pulsar (default: the lane's name)
    bootstrap: str | None = None  # kafka
    service_url: str | None = None  # pulsar
    admin_url: str | None = None  # pulsar (doctor checks it)
    # pulsar: "deliver_at" hands each message over lead_ms early and Pulsar holds it
    handoff: Literal["publish", "deliver_at"] = "publish"
    lead_ms: Annotated[int, msgspec.Meta(ge=0, le=86_400_000)] = DEFAULT_HANDOFF_LEAD_MS
    ordered: bool = False  # one key's messages publish in order (placed by key)
    # new work only: a deliverAt further ahead of its record's broker time is REJECTED
    # MAX_DELAY_EXCEEDED ("0s": no limit); a SCHEDULE into a lane holding max_pending
    # unfinished messages is REJECTED LANE_FULL (0: no limit)
    max_delay: str = DEFAULT_MAX_DELAY
    max_pending: Annotated[int, msgspec.Meta(ge=0)] = 0
    # retention (docs/rules.md): a terminal message (PUBLISHED, CANCELLED, EXPIRED,
    # FAILED) is removed with its attempts this long after it ended ("0s": kept); a
    # result answers a retry of its command for dedup_window, after which a reused
    # command id is a new command ("0s": kept). Broker time, swept through the log.
    retention: str = DEFAULT_RETENTION
    dedup_window: str = DEFAULT_RETENTION

    @property
    def deliver_at_handoff(self) -> bool:
        """The destination holds each message until deliverAt (Pulsar ``deliver_at``)."""
        return self.destination == "pulsar" and self.handoff == "deliver_at"

    @property
    def max_delay_ms(self) -> int:
        """``max_delay`` in milliseconds (checked when the file is read)."""
        return parse_duration_ms(self.max_delay, field="max_delay")

    @property
    def retention_ms(self) -> int:
        """``retention`` in milliseconds (checked when the file is read)."""
        return parse_duration_ms(self.retention, field="retention")

    @property
    def dedup_window_ms(self) -> int:
        """``dedup_window`` in milliseconds (checked when the file is read)."""
        return parse_duration_ms(self.dedup_window, field="dedup_window")

    @property
    def handoff_lead_ms(self) -> int:
        """How long before deliverAt this lane's destination may be handed a message: its
        ``lead_ms`` for a deliver-at handoff, else 0 (a plain publish is never early). The
        engine replicates it into the lane's policy (LANE_CONFIG), where apply reads it."""
        return self.lead_ms if self.deliver_at_handoff else 0


class EngineConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[engine]``: the daemon's runtime settings."""

    max_clock_error_ms: NonNegative = 20
    chrony: bool = False  # add chronyd's error estimate; trust the clock only while synced
    evidence_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    stop_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    quantum: Positive = 256  # DRR: claims per lane per round
    # what one round's claims may cost a shard's next turn; lanes with due work wait for a
    # turn, so this bounds their lateness behind a herd (0: rounds bounded by quantum alone)
    turn_target_ms: Annotated[float, msgspec.Meta(ge=0, le=10_000)] = 25
    claim_ttl_ms: Annotated[int, msgspec.Meta(ge=100)] = 30_000
    max_in_flight: Positive = 2_000
    lane_in_flight: Positive = 1_000
    max_in_flight_bytes: Positive = 64 << 20
    poll_interval_ms: Annotated[float, msgspec.Meta(ge=1, le=1_000)] = 5
    # the engine's block cache and memtable budget, shared by every shard database of a
    # process; worker processes split it evenly
    memory_mb: Annotated[int, msgspec.Meta(ge=16, le=1_048_576)] = 256
    # worker processes (`engine start --workers N` overrides); unset: one per core this
    # process may run on, at most one per shard
    workers: Annotated[int, msgspec.Meta(ge=1, le=256)] | None = None
    # the engine's log: "debug" adds a line for each step of every message's life
    # (admitted, published), each carrying its delay message id and attempt id
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # how often the engine collects large payloads nobody can publish any more (what
    # `nereus payload gc --yes` deletes: a swept message's object, an expired reservation;
    # never a Recovery Set member's); "0s" leaves it to the operator
    payload_gc_interval: str = "1h"

    @property
    def payload_gc_interval_s(self) -> float:
        """``payload_gc_interval`` in seconds, 0 for off (checked when the file is read)."""
        return parse_duration_ms(self.payload_gc_interval, field="payload_gc_interval") / 1000


class ObjectSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[objects]``: where checkpoints and large payloads live."""

    store: Literal["file", "s3"] = "file"  # file (<home>/objects, or path) | s3
    path: str | None = None
    bucket: str | None = None
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None


class CheckpointSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[checkpoints]``: when the engine takes them and how many recovery may use."""

    every_records: NonNegative = 100_000  # 0 = not by record count
    every_seconds: NonNegative = 3_600  # 0 = not by time
    keep: Positive = 3  # the Recovery Set: the newest `keep` catalogued checkpoints
    prune_log: bool = False  # delete log segments wholly below the Recovery Floor


class ClusterSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[cluster]``: this home is one node of a cluster whose configuration (routes, lanes,
    object store, checkpoints, shard limits) lives in the coordinator."""

    coordinator: str  # etcd://HOST:PORT/CLUSTER | sqlite:///ABS/PATH.db/CLUSTER
    node_id: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    capacity: Annotated[int, msgspec.Meta(ge=0, le=1_000)] = 1  # placement weight; 0: none
    session_ttl_ms: Annotated[int, msgspec.Meta(ge=1_000, le=600_000)] = 10_000
    # no producer call once the session is alive for less than this much longer
    lease_margin_ms: Annotated[int, msgspec.Meta(ge=100, le=60_000)] = 2_000
    host: str = ""  # how other hosts reach this node (default: the host name)


LISTEN: Final = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):[0-9]{1,5}")


class MetricsSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[metrics]``: the Prometheus exposition over HTTP (opt-in; ``nereus metrics`` reads
    the same text through the admin socket whether or not it is set)."""

    # HOST:PORT the engine serves GET /metrics on (e.g. "127.0.0.1:9464"; an IPv6 host in
    # brackets: "[::1]:9464"); unset: no listener. Checked by parse_config (LISTEN).
    listen: str | None = None

    @property
    def address(self) -> tuple[str, int] | None:
        """``listen`` as (host, port); a bracketed IPv6 host loses its brackets."""
        if self.listen is None:
            return None
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


# the tables a cluster's configuration holds; a node's own nereus.toml keeps the others
CLUSTER_TABLES: Final = ("routes", "lanes", "shard", "objects", "checkpoints")
NODE_TABLES: Final = ("engine", "cluster", "metrics")


@dataclass(frozen=True, slots=True)
class Config:
    routes: dict[str, RouteSettings]
    lanes: dict[str, LaneSettings]
    limits: Limits
    source: str
    engine: EngineConfig = field(default_factory=EngineConfig)
    objects: ObjectSettings = field(default_factory=ObjectSettings)
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    cluster: ClusterSettings | None = None
    metrics: MetricsSettings = field(default_factory=MetricsSettings)

    @property
    def ordered_lanes(self) -> frozenset[str]:
        return frozenset(name for name, lane in self.lanes.items() if lane.ordered)

    def route_name(self, given: str | None) -> str:
        """The route a command means: ``given``, else the only configured route, else
        ``default``. Several routes and none given is a usage error naming them."""
        if given is not None:
            return given
        if len(self.routes) == 1:
            return next(iter(self.routes))
        if "default" in self.routes or not self.routes:
            return "default"
        from nereus.errors import UsageError

        raise UsageError(f"{self.source} configures {len(self.routes)} routes "
                         f"({', '.join(sorted(self.routes))}) and none is named default",
                         hint="say which with --route NAME")

    def route(self, name: str) -> RouteSettings:
        try:
            return self.routes[name]
        except KeyError:
            from nereus.errors import NotFound

            known = ", ".join(sorted(self.routes)) or "none"
            raise NotFound(f"no route {name!r} in {self.source} (configured: {known})") from None


# the tables of the file and the Struct each one is
_TABLE_TYPES: Final[dict[str, type[msgspec.Struct]]] = {
    "routes": RouteSettings, "lanes": LaneSettings, "shard": Limits, "engine": EngineConfig,
    "objects": ObjectSettings, "checkpoints": CheckpointSettings, "cluster": ClusterSettings,
    "metrics": MetricsSettings,
}


def _line_of(text: str, table: str, key: str | None = None) -> int | None:
    """1-based line of ``key`` inside ``[table]`` (or of the table header)."""
    header = re.compile(r"^\s*\[\s*" + re.escape(table).replace(r"\.", r"\s*\.\s*") + r"\s*\]")
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if header.match(line):
            if key is None:
                return index + 1
            for offset, inner in enumerate(lines[index + 1:], start=index + 2):
                if inner.lstrip().startswith("["):
                    break
                if re.match(r"^\s*" + re.escape(key) + r"\s*=", inner):
                    return offset
            return index + 1
    return None


def _error(text: str, source: str, table: str | None, key: str | None,
           message: str, hint: str | None = None) -> ConfigError:
    line = _line_of(text, table, key) if table else None
    where = f"{source}:{line}" if line else source
    prefix = f"[{table}] " if table else ""
    return ConfigError(f"{where}: {prefix}{message}", hint=hint)


def _expected(text: str) -> str:
    """msgspec's "Expected `int` >= 1" as plain words."""
    words = {"`int`": "an integer", "`float`": "a number", "`bool`": "true or false",
             "`str`": "a string", "`object`": "a table", "`array`": "a list"}
    for code, word in words.items():
        text = text.replace(code, word)
    return text.replace("Expected ", "expected ").replace("`", "")


def _did_you_mean(name: str, known: list[str]) -> str | None:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"known: {', '.join(known)}" if known else None


def _explain(exc: msgspec.ValidationError, table: str, kind: type[msgspec.Struct],
             data: Mapping[str, object], text: str, source: str) -> ConfigError:
    """A ConfigError for ``exc``, raised converting ``data`` (table ``table``) to ``kind``."""
    detail, _, at = str(exc).rpartition(" - at `")
    if not detail:
        detail, at = str(exc), ""
    path = [part for part in at.rstrip("`").removeprefix("$").split(".") if part]
    unknown = re.match(r"Object contains unknown field `([^`]+)`", detail)
    if unknown and not path:
        name = unknown.group(1)
        known = [k for k in kind.__struct_fields__ if k != "name"]
        return _error(text, source, table, name, f"unknown key {name!r}",
                      _did_you_mean(name, known))
    missing = re.match(r"Object missing required field `([^`]+)`", detail)
    if missing:
        return _error(text, source, table, None, f"needs {missing.group(1)} = ...")
    key = path[0] if path else None
    value = data.get(key) if key is not None else None
    shown = f"{key} = {value!r}" if key is not None else "this table"
    hint = None
    if detail.startswith("Invalid enum value") and key is not None:
        allowed = [str(a) for a in get_args(get_type_hints(kind)[key])]
        return _error(text, source, table, key,
                      f"{shown}: expected one of {', '.join(allowed)}",
                      _did_you_mean(str(value), allowed))
    if isinstance(value, str) and value.lower() in ("true", "false") and "bool" in detail:
        hint = f"write {key} = {value.lower()} (no quotes): a quoted value is a string"
    elif isinstance(value, str) and re.fullmatch(r"-?\d+(\.\d+)?", value):
        hint = f"write {key} = {value} (no quotes): a quoted value is a string"
    return _error(text, source, table, key, f"{shown}: {_expected(detail)}", hint)


_Table = TypeVar("_Table", bound=msgspec.Struct)


def _convert(data: object, kind: type[_Table], table: str, text: str, source: str) -> _Table:
    """The TOML table ``data`` as ``kind``; a ConfigError naming the table, key and line."""
    if not isinstance(data, dict):
        raise _error(text, source, table, None, "must be a table")
    try:
        return msgspec.convert(data, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise _explain(exc, table, kind, data, text, source) from None


def parse_config(text: str, *, source: str = "nereus.toml") -> Config:
    """Parse and validate ``text`` (the content of ``source``)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    for name in data:
        if name not in _TABLE_TYPES:
            line = _line_of(text, name)
            where = f"{source}:{line}" if line else source
            raise ConfigError(f"{where}: unknown table [{name}]",
                              hint=_did_you_mean(name, list(_TABLE_TYPES)))
    routes: dict[str, RouteSettings] = {}
    for name, table in _group(data, "routes", text, source).items():
        where = f"routes.{name}"
        try:
            validate_route_name(name)
        except Exception as exc:
            raise _error(text, source, where, None, str(exc)) from None
        _no_name_key(table, where, text, source)
        route: RouteSettings = _convert(table, RouteSettings, where, text, source)
        if route.id and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", route.id):
            raise _error(text, source, where, "id",
                         f"id = {route.id!r}: expected 1-64 of A-Z a-z 0-9 . _ -")
        if route.min_insync_replicas is not None and route.replication_factor is not None \
                and route.min_insync_replicas > route.replication_factor:
            raise _error(text, source, where, "min_insync_replicas",
                         f"min_insync_replicas = {route.min_insync_replicas} is more than "
                         f"replication_factor = {route.replication_factor}")
        try:
            route.dedup_window_ms  # noqa: B018 - a duration, or the file is refused here
        except UsageError as exc:
            raise _error(text, source, where, "dedup_window", exc.message) from None
        routes[name] = msgspec.structs.replace(route, name=name)
    lanes: dict[str, LaneSettings] = {}
    for name, table in _group(data, "lanes", text, source).items():
        where = f"lanes.{name}"
        if not LANE_NAME.match(name):
            raise _error(text, source, where, None,
                         "lane names are 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit")
        _no_name_key(table, where, text, source)
        lane: LaneSettings = _convert(table, LaneSettings, where, text, source)
        if lane.destination == "file" and lane.path is None:
            raise _error(text, source, where, "path", "a file lane needs path = \"...\"")
        for duration in ("max_delay", "retention", "dedup_window"):
            try:
                getattr(lane, f"{duration}_ms")  # a duration, or the file is refused here
            except UsageError as exc:
                raise _error(text, source, where, duration, exc.message) from None
        if lane.handoff == "deliver_at" and lane.destination != "pulsar":
            raise _error(text, source, where, "handoff",
                         f"handoff = \"deliver_at\" needs a destination that holds messages "
                         f"until deliverAt (pulsar), not {lane.destination}")
        lanes[name] = msgspec.structs.replace(lane, name=name)
    limits: Limits = _convert(data.get("shard", {}), Limits, "shard", text, source)
    engine: EngineConfig = _convert(data.get("engine", {}), EngineConfig, "engine", text, source)
    try:
        engine.payload_gc_interval_s  # noqa: B018 - a duration, or the file is refused here
    except UsageError as exc:
        raise _error(text, source, "engine", "payload_gc_interval", exc.message) from None
    objects: ObjectSettings = _convert(data.get("objects", {}), ObjectSettings, "objects", text,
                                       source)
    checkpoints: CheckpointSettings = _convert(data.get("checkpoints", {}), CheckpointSettings,
                                               "checkpoints", text, source)
    if objects.store == "s3" and not objects.bucket:
        raise _error(text, source, "objects", "bucket", "an s3 object store needs bucket = \"...\"")
    cluster: ClusterSettings | None = None
    if "cluster" in data:
        cluster = _convert(data["cluster"], ClusterSettings, "cluster", text, source)
        if cluster.lease_margin_ms * 2 > cluster.session_ttl_ms:
            raise _error(text, source, "cluster", "lease_margin_ms",
                         f"lease_margin_ms = {cluster.lease_margin_ms} is more than half of "
                         f"session_ttl_ms = {cluster.session_ttl_ms}: a node would stop "
                         "publishing between heartbeats")
    metrics: MetricsSettings = _convert(data.get("metrics", {}), MetricsSettings, "metrics",
                                        text, source)
    if metrics.listen is not None and (not LISTEN.fullmatch(metrics.listen)
                                       or not 0 < int(metrics.listen.rpartition(":")[2]) < 65_536):
        raise _error(text, source, "metrics", "listen",
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
        raise _error(text, source, None, None,
                     f"[{name}] holds tables: write [{name}.NAME] with its keys")
    return {str(key): table for key, table in group.items()}


def _no_name_key(table: Mapping[str, object], where: str, text: str, source: str) -> None:
    if "name" in table:
        raise _error(text, source, where, "name",
                     "unknown key 'name' (the table's own name is the name)")
