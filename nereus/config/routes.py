"""``[routes.NAME]``: one ingress route, whose partitions are its shards (``RouteSettings``)."""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from nereus.config.fields import DEFAULT_RETENTION, Positive
from nereus.records.system import RouteIdentity
from nereus.timespec import parse_duration_ms

LOG_BACKENDS: Final = ("file", "kafka", "pulsar")


class RouteSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[routes.NAME]``: one ingress route; its partitions are its shards."""

    name: str = ""  # the table's name (filled in; not a key of the table)
    id: str = ""  # the route's identity, in the first record of each log partition
    log: Literal["file", "kafka", "pulsar"] = "file"
    partitions: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 1
    bootstrap: str | None = None  # kafka
    kafka: str | None = None  # kafka: the [kafka.NAME] connection (fills in bootstrap)
    service_url: str | None = None  # pulsar
    pulsar: str | None = None  # pulsar: the [pulsar.NAME] connection (fills in both URLs)
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
    # (SHARD_RETENTION, docs/rules.md §5); "0s" keeps them for ever, and those kept go
    # once a window is configured again (the owner catches them up)
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
