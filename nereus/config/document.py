"""The whole ``nereus.toml`` as one value (``Config``), its tables and the Struct each is.

``TABLE_TYPES`` is the one list of the file's tables: the parser refuses any other table
and converts each one to its Struct. ``CLUSTER_TABLES`` are what a cluster's configuration
record holds; ``NODE_TABLES`` stay in a node's own file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import msgspec

from nereus.config.connections import KafkaConnection, PulsarConnection
from nereus.config.engine import EngineConfig
from nereus.config.lanes import LaneSettings
from nereus.config.node import ClusterSettings, MetricsSettings
from nereus.config.routes import RouteSettings
from nereus.config.storage import CheckpointSettings, ObjectSettings
from nereus.machine.limits import Limits

# the tables a cluster's configuration holds; a node's own nereus.toml keeps the others
CLUSTER_TABLES: Final = ("routes", "lanes", "shard", "objects", "checkpoints", "kafka",
                         "pulsar", "features")
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
    kafka: dict[str, KafkaConnection] = field(default_factory=dict)
    pulsar: dict[str, PulsarConnection] = field(default_factory=dict)

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


class FeatureSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[features]`` in a cluster's configuration: its feature level, written there by
    ``nereus upgrade finalize`` beside the level's own record, so that a 0.1.0 node (which
    knows no such table) refuses the configuration instead of joining below the level."""

    level: int = 1


# the tables of the file and the Struct each one is
TABLE_TYPES: Final[dict[str, type[msgspec.Struct]]] = {
    "routes": RouteSettings, "lanes": LaneSettings, "shard": Limits, "engine": EngineConfig,
    "objects": ObjectSettings, "checkpoints": CheckpointSettings, "cluster": ClusterSettings,
    "metrics": MetricsSettings, "kafka": KafkaConnection, "pulsar": PulsarConnection,
    "features": FeatureSettings,
}
