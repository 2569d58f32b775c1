"""``nereus.toml``: parsing and validation with file and line in every error.

::

    [routes.default]          # one route; its partitions are shards default/0 ...
    log = "file"              # file (embedded) | kafka | pulsar
    partitions = 1

    [lanes.local]             # a destination lane
    destination = "file"
    path = "outbox/local.jsonl"   # relative to the home, or absolute

    [shard]                   # state machine limits (replay must use the same ones)
    max_inline_payload_bytes = 65536

Unknown keys are errors, not silently ignored: a typo in a durability setting must not
pass unnoticed.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, fields
from typing import Any

from nereus.errors import ConfigError
from nereus.machine.limits import Limits
from nereus.machine.validate import LANE_NAME
from nereus.records.system import RouteIdentity
from nereus.shard import validate_route_name

LOG_BACKENDS = ("file", "kafka", "pulsar")
DESTINATIONS = ("file", "kafka", "pulsar")
_ROUTE_KEYS = {"id", "log", "partitions", "bootstrap", "service_url", "admin_url", "topic"}
_LANE_KEYS = {"destination", "path", "topic", "bootstrap", "service_url", "handoff", "lead_ms",
              "ordered"}


@dataclass(frozen=True, slots=True)
class RouteSettings:
    name: str
    log: str
    partitions: int
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def route_id(self) -> str:
        """The route's identity (``id``, made by ``nereus init``; "" when absent)."""
        return str(self.options.get("id", ""))

    def identity(self, partition: int) -> RouteIdentity:
        """The ROUTE_IDENTITY the first record of partition ``partition`` must be."""
        return RouteIdentity(route_id=self.route_id, route=self.name, partition=partition,
                             partitions=self.partitions)


DEFAULT_HANDOFF_LEAD_MS = 1_000


@dataclass(frozen=True, slots=True)
class LaneSettings:
    name: str
    destination: str
    path: str | None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def ordered(self) -> bool:
        """An ORDERED lane: messages with one key publish in order, across the route (they
        are placed by key); the engine replicates it into the lane's policy."""
        return self.options.get("ordered") is True

    @property
    def deliver_at_handoff(self) -> bool:
        """The destination holds each message until deliverAt (Pulsar ``deliver_at``)."""
        return self.destination == "pulsar" and self.options.get("handoff") == "deliver_at"

    @property
    def handoff_lead_ms(self) -> int:
        """How long before deliverAt this lane's destination may be handed a message: its
        ``lead_ms`` for a deliver-at handoff, else 0 (a plain publish is never early). The
        engine replicates it into the lane's policy (LANE_CONFIG), where apply reads it."""
        if not self.deliver_at_handoff:
            return 0
        return int(self.options.get("lead_ms", DEFAULT_HANDOFF_LEAD_MS))


@dataclass(frozen=True, slots=True)
class ObjectSettings:
    """``[objects]``: where checkpoints and large payloads live."""

    store: str = "file"  # file (<home>/objects, or path) | s3
    path: str | None = None
    bucket: str | None = None
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None


@dataclass(frozen=True, slots=True)
class CheckpointSettings:
    """``[checkpoints]``: when the engine takes them and how many recovery may use."""

    every_records: int = 100_000  # 0 = not by record count
    every_seconds: int = 3_600  # 0 = not by time
    keep: int = 3  # the Recovery Set: the newest `keep` catalogued checkpoints
    prune_log: bool = False  # delete log segments wholly below the Recovery Floor


@dataclass(frozen=True, slots=True)
class Config:
    routes: dict[str, RouteSettings]
    lanes: dict[str, LaneSettings]
    limits: Limits
    source: str
    engine: dict[str, Any] = field(default_factory=dict)
    objects: ObjectSettings = field(default_factory=ObjectSettings)
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)

    @property
    def ordered_lanes(self) -> frozenset[str]:
        return frozenset(name for name, lane in self.lanes.items() if lane.ordered)

    def route(self, name: str) -> RouteSettings:
        try:
            return self.routes[name]
        except KeyError:
            from nereus.errors import NotFound

            known = ", ".join(sorted(self.routes)) or "none"
            raise NotFound(f"no route {name!r} in {self.source} (configured: {known})") from None


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


def _error(text: str, source: str, table: str, key: str | None, message: str) -> ConfigError:
    line = _line_of(text, table, key)
    where = f"{source}:{line}" if line else source
    return ConfigError(f"{where}: [{table}] {message}")


def parse_config(text: str, *, source: str = "nereus.toml") -> Config:
    """Parse and validate ``text`` (the content of ``source``)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    unknown = set(data) - {"routes", "lanes", "shard", "engine", "objects", "checkpoints"}
    if unknown:
        raise ConfigError(f"{source}: unknown table(s) {', '.join(sorted(unknown))}",
                          hint="known tables: routes, lanes, shard, engine, objects, checkpoints")
    routes: dict[str, RouteSettings] = {}
    for name, table in data.get("routes", {}).items():
        where = f"routes.{name}"
        try:
            validate_route_name(name)
        except Exception as exc:
            raise _error(text, source, where, None, str(exc)) from None
        for key in set(table) - _ROUTE_KEYS:
            raise _error(text, source, where, key, f"unknown key {key!r}")
        log = table.get("log", "file")
        if log not in LOG_BACKENDS:
            raise _error(text, source, where, "log",
                         f"log = {log!r}; expected one of {', '.join(LOG_BACKENDS)}")
        partitions = table.get("partitions", 1)
        if not isinstance(partitions, int) or isinstance(partitions, bool) or not (
            1 <= partitions <= 4096
        ):
            raise _error(text, source, where, "partitions",
                         f"partitions = {partitions!r}; expected an integer 1..4096")
        options = {k: v for k, v in table.items() if k not in ("log", "partitions")}
        routes[name] = RouteSettings(name, log, partitions, options)
    lanes: dict[str, LaneSettings] = {}
    for name, table in data.get("lanes", {}).items():
        where = f"lanes.{name}"
        if not LANE_NAME.match(name):
            raise _error(text, source, where, None,
                         "lane names are 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit")
        for key in set(table) - _LANE_KEYS:
            raise _error(text, source, where, key, f"unknown key {key!r}")
        destination = table.get("destination")
        if destination not in DESTINATIONS:
            raise _error(text, source, where, "destination",
                         f"destination = {destination!r}; expected one of "
                         f"{', '.join(DESTINATIONS)}")
        path = table.get("path")
        if destination == "file" and not isinstance(path, str):
            raise _error(text, source, where, "path", "a file lane needs path = \"...\"")
        options = {k: v for k, v in table.items() if k not in ("destination", "path")}
        lanes[name] = LaneSettings(name, destination, path, options)
    limit_table = data.get("shard", {})
    known = {f.name for f in fields(Limits)}
    for key, value in limit_table.items():
        if key not in known:
            raise _error(text, source, "shard", key, f"unknown limit {key!r}")
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise _error(text, source, "shard", key, f"{key} must be a positive integer")
    engine = data.get("engine", {})
    if not isinstance(engine, dict):
        raise _error(text, source, "engine", None, "[engine] must be a table")
    objects = _objects(text, source, data.get("objects", {}))
    checkpoints = _checkpoints(text, source, data.get("checkpoints", {}))
    return Config(routes, lanes, Limits(**limit_table), source, engine, objects, checkpoints)


def _objects(text: str, source: str, table: dict[str, Any]) -> ObjectSettings:
    known = {f.name for f in fields(ObjectSettings)}
    for key in table:
        if key not in known:
            raise _error(text, source, "objects", key, f"unknown key {key!r}")
    settings = ObjectSettings(**table)
    if settings.store not in ("file", "s3"):
        raise _error(text, source, "objects", "store",
                     f"store = {settings.store!r}; expected \"file\" or \"s3\"")
    if settings.store == "s3" and not settings.bucket:
        raise _error(text, source, "objects", "bucket", "an s3 object store needs bucket = \"...\"")
    return settings


def _checkpoints(text: str, source: str, table: dict[str, Any]) -> CheckpointSettings:
    known = {f.name for f in fields(CheckpointSettings)}
    for key, value in table.items():
        if key not in known:
            raise _error(text, source, "checkpoints", key, f"unknown key {key!r}")
        if key != "prune_log" and (not isinstance(value, int) or isinstance(value, bool)
                                   or value < 0):
            raise _error(text, source, "checkpoints", key, f"{key} must be an integer >= 0")
    settings = CheckpointSettings(**table)
    if settings.keep < 1:
        raise _error(text, source, "checkpoints", "keep", "keep must be at least 1")
    return settings


def render_config(*, route: str, partitions: int, log: str, route_id: str) -> str:
    """The nereus.toml ``nereus init`` writes."""
    broker = {
        "kafka": 'bootstrap = "127.0.0.1:9092"\n',
        "pulsar": 'service_url = "pulsar://127.0.0.1:6650"\nadmin_url = "http://127.0.0.1:8080"\n',
    }.get(log, "")
    return f"""# Nereus Delay configuration (written by `nereus init`).

[routes.{route}]
id = "{route_id}"  # this route's identity, in the first record of each log partition
log = "{log}"          # file (embedded) | kafka | pulsar
partitions = {partitions}
{broker}
[lanes.local]
destination = "file"
path = "outbox/local.jsonl"  # relative to this home, or absolute

[shard]
max_inline_payload_bytes = 65536
"""
