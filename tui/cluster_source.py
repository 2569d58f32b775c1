"""Where the cluster screen's data comes from: the coordinator's records, read directly.

The dashboard reads a cluster through ``ClusterStore.snapshot()`` (the records every node
and the CLI read), not through the CLI and not through any node's engine: the screen keeps
working while this home's engine is stopped, which is when an operator needs it (a drain,
a rolling restart). Tests hand in a ``ClusterSource`` of fixed views instead.

Contract: ``read`` blocks (call it from a worker thread), opens the coordinator on first
use, and raises a ``NereusError`` when the coordinator does not answer or a record does
not decode; ``close`` lets the coordinator go (the next ``read`` opens it again). The same
thread that reads closes: the cluster screen's refresh worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import msgspec

from nereus.adapters.cluster.cluster_store import ClusterStore, ClusterView
from nereus.adapters.cluster.coordinator_url import ClusterHandle, open_cluster
from nereus.errors import NereusError


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterReading:
    """One read of the cluster's records."""

    cluster: str
    coordinator: str  # its URL
    view: ClusterView


class ClusterSource(Protocol):
    """What the cluster screen reads. ``read`` blocks; call it from a worker thread."""

    @property
    def where(self) -> str:
        """The coordinator's URL, for messages."""
        ...

    @property
    def node_id(self) -> str | None:
        """This home's node id (marked on the screen), None when it is not a node."""
        ...

    def read(self) -> ClusterReading:
        """Every record of the cluster now; raises NereusError when unreadable."""
        ...

    def close(self) -> None:
        """Let the coordinator go (idempotent)."""
        ...


class CoordinatorSource:
    """A ``ClusterSource`` over ``open_cluster(url)``: this home's ``[cluster]``."""

    def __init__(self, url: str, *, node_id: str | None = None) -> None:
        self.url = url
        self._node_id = node_id
        self._handle: ClusterHandle | None = None

    @property
    def where(self) -> str:
        return self.url

    @property
    def node_id(self) -> str | None:
        return self._node_id

    def read(self) -> ClusterReading:
        if self._handle is None:
            self._handle = open_cluster(self.url)
        try:
            view = ClusterStore(self._handle).snapshot()
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise NereusError(f"a record of the cluster at {self.url} does not decode: {exc}",
                              hint="a newer node may have written it: run this home's "
                                   "version of nereus on every node") from None
        except NereusError:
            self.close()  # the next read opens the coordinator afresh
            raise
        return ClusterReading(cluster=self._handle.cluster, coordinator=self._handle.url,
                              view=view)

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()
