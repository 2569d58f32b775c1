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
from nereus.shard import validate_route_name

LOG_BACKENDS = ("file", "kafka", "pulsar")
DESTINATIONS = ("file", "kafka", "pulsar")
_ROUTE_KEYS = {"log", "partitions", "bootstrap", "service_url", "topic"}
_LANE_KEYS = {"destination", "path", "topic", "bootstrap", "service_url", "lead_ms"}


@dataclass(frozen=True, slots=True)
class RouteSettings:
    name: str
    log: str
    partitions: int
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LaneSettings:
    name: str
    destination: str
    path: str | None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Config:
    routes: dict[str, RouteSettings]
    lanes: dict[str, LaneSettings]
    limits: Limits
    source: str
    engine: dict[str, Any] = field(default_factory=dict)

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
    unknown = set(data) - {"routes", "lanes", "shard", "engine"}
    if unknown:
        raise ConfigError(f"{source}: unknown table(s) {', '.join(sorted(unknown))}",
                          hint="known tables: routes, lanes, shard, engine")
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
    return Config(routes, lanes, Limits(**limit_table), source, engine)


def render_config(*, route: str, partitions: int, log: str) -> str:
    """The nereus.toml ``nereus init`` writes."""
    return f"""# Nereus Delay configuration (written by `nereus init`).

[routes.{route}]
log = "{log}"          # file (embedded) | kafka | pulsar
partitions = {partitions}

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"  # relative to this home, or absolute

[shard]
max_inline_payload_bytes = 65536
"""
