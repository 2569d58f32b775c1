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

One module a concept; import from the package, which names them all:

- ``routes`` (``[routes.NAME]``), ``lanes`` (``[lanes.NAME]``), ``engine`` (``[engine]``),
  ``storage`` (``[objects]``, ``[checkpoints]``), ``node`` (``[cluster]``, ``[metrics]``);
  ``[shard]`` is ``nereus.machine.limits.Limits``; ``fields`` the types they share;
- ``document``: ``Config``, the whole file, and the Struct of each table;
- ``parse``: ``parse_config`` and ``tables_of``; ``explain`` words their errors.
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
