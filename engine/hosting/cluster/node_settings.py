"""A cluster node's settings, where it reads its configuration again, and how long it holds
a failed shard before trying it again (``FAILED_RETRY_S`` doubling; a database another process
still holds: ``IN_USE_RETRY_S``, doubling).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from nereus.adapters.cluster.evidence_seal import SealKey
from nereus.config import Config

FAILED_RETRY_S: Final = 30.0  # a shard held FAILED is tried again after this,
FAILED_RETRY_MAX_S: Final = 300.0  # doubling up to this
# a shard whose database another process still holds (the previous owner's process letting
# go: a stopped worker, a node's engine still exiting) is tried again after this, doubling
# up to IN_USE_RETRY_MAX_S: waiting for a process, not a failure to sit out
IN_USE_RETRY_S: Final = 0.5
IN_USE_RETRY_MAX_S: Final = 5.0


@dataclass(slots=True)
class HeldFailure:
    """A shard this node holds FAILED: why, and when to try it again."""

    reason: str
    refused: bool  # opening it raised (else its loop failed)
    attempts: int  # failed activations in a row
    retry_at: float  # the node clock's monotonic reading


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """Who this node is, where it answers, and how it keeps its session and its shards."""

    node_id: str
    host: str
    address: str  # the admin socket
    capacity: int = 1
    session_ttl_ms: int = 10_000
    lease_margin_ms: int = 2_000
    interval_s: float = 0.5  # reconcile at least this often
    version: str = ""
    feature_level: int = 1  # the highest feature level this build supports
    warm_up: bool = True  # warm shards placed here while another node still owns them
    standby: bool = True  # warm the shards this node stands by for (owned by another node)
    warm_wait_s: float = 300.0  # a planned move waits this long, at most, for a warm target
    seal_key: SealKey | None = None  # opens the routes' sealed evidence keys (a rotation)


class ConfigSource(Protocol):
    """Where the node reads its whole configuration again once the cluster's changed."""

    def __call__(self) -> Config: ...
