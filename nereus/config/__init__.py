"""``nereus.toml``: one typed schema, checked in one place, with file and line in every error.

::

    [routes.default]          # a route: log = "file" | "kafka" | "pulsar", partitions
    [lanes.local]             # a destination lane: destination = "file", path = ...

Every table is a frozen msgspec Struct converted *strictly*: an unknown key ("did you
mean"), a wrong type (``chrony = "false"``) or a value out of range (``max_in_flight = 0``)
is a ``ConfigError`` (exit 2) naming ``nereus.toml:LINE``, the key and what was expected.
One module a concept (``routes``, ``lanes``, ``engine``, ``storage``, ``node``; ``[shard]``
is ``nereus.machine.limits.Limits``; ``document``, ``parse``, ``explain``); import from here.
"""

from __future__ import annotations

from nereus.config.document import CLUSTER_TABLES, NODE_TABLES, Config
from nereus.config.engine import EngineConfig
from nereus.config.fields import DEFAULT_RETENTION, NonNegative, Positive
from nereus.config.lanes import (
    DEFAULT_HANDOFF_LEAD_MS,
    DEFAULT_MAX_DELAY,
    DESTINATIONS,
    LaneSettings,
)
from nereus.config.node import LISTEN, ClusterSettings, MetricsSettings
from nereus.config.parse import parse_config, tables_of
from nereus.config.routes import LOG_BACKENDS, RouteSettings
from nereus.config.storage import CheckpointSettings, ObjectSettings

__all__ = [
    "CLUSTER_TABLES",
    "DEFAULT_HANDOFF_LEAD_MS",
    "DEFAULT_MAX_DELAY",
    "DEFAULT_RETENTION",
    "DESTINATIONS",
    "LISTEN",
    "LOG_BACKENDS",
    "NODE_TABLES",
    "CheckpointSettings",
    "ClusterSettings",
    "Config",
    "EngineConfig",
    "LaneSettings",
    "MetricsSettings",
    "NonNegative",
    "ObjectSettings",
    "Positive",
    "RouteSettings",
    "parse_config",
    "tables_of",
]
