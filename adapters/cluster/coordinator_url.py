"""A coordinator by URL: ``oxia://HOST:PORT/[NAMESPACE/]CLUSTER``,
``etcd://HOST:PORT/CLUSTER`` or the embedded ``sqlite:///ABSOLUTE/PATH.db/CLUSTER`` (one
SQLite file may hold several clusters).

``ClusterHandle`` carries the coordinator and the root under which the cluster's records
live: Oxia and etcd namespace a cluster themselves (``nereus/<cluster>/``,
``/nereus/<cluster>/keys/``); in SQLite the cluster name is the first key segment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from nereus.adapters.backends.coordination.coordinator_clock import SYSTEM_CLOCK, CoordinatorClock
from nereus.config.url_credentials import refuse_credentials
from nereus.coordination.protocol import Coordinator
from nereus.errors import UsageError

_FORMS: Final = ("oxia://HOST:PORT/CLUSTER (e.g. oxia://127.0.0.1:6648/prod), "
                 "etcd://HOST:PORT/CLUSTER (e.g. etcd://127.0.0.1:2379/prod) or "
                 "sqlite:///ABSOLUTE/PATH.db/CLUSTER (the embedded coordinator)")


@dataclass(frozen=True, slots=True)
class ClusterHandle:
    """One cluster's place in one coordinator."""

    url: str
    cluster: str
    coordinator: Coordinator
    root: str  # every key of the cluster starts with it

    def close(self) -> None:
        self.coordinator.close()


def sqlite_url(path: Path, cluster: str) -> str:
    """The URL of the embedded coordinator in ``path`` for ``cluster``."""
    return f"sqlite://{path.resolve()}/{cluster}"


def open_cluster(url: str, *, clock: CoordinatorClock = SYSTEM_CLOCK) -> ClusterHandle:
    """The coordinator ``url`` names (a ``UsageError`` says what is wrong with it; a URL
    with a user or password is refused, never shown)."""
    refuse_credentials(url)
    scheme = urlsplit(url).scheme
    if scheme == "oxia":
        from nereus.adapters.backends.coordination.oxia import OxiaCoordinator

        oxia = OxiaCoordinator.from_url(url, clock=clock)
        return ClusterHandle(oxia.address.url, oxia.address.cluster, oxia, "")
    if scheme == "etcd":
        from nereus.adapters.backends.coordination.etcd import EtcdCoordinator

        etcd = EtcdCoordinator.from_url(url, clock=clock)
        return ClusterHandle(etcd.address.url, etcd.address.cluster, etcd, "")
    if scheme == "sqlite":
        from nereus.adapters.backends.coordination.etcd_wire import CLUSTER_NAME
        from nereus.adapters.backends.coordination.sqlite import SqliteCoordinator

        parts = urlsplit(url)
        file, _, cluster = parts.path.rpartition("/")
        if parts.netloc or not file.startswith("/") or parts.query or parts.fragment:
            raise UsageError(f"{url!r}: the embedded coordinator's URL is "
                             "sqlite:///ABSOLUTE/PATH.db/CLUSTER", hint=f"write {_FORMS}")
        if not CLUSTER_NAME.fullmatch(cluster):
            raise UsageError(f"{url!r}: {cluster!r} is not a cluster name (letters, digits, "
                             "'.', '_' or '-', at most 100)", hint=f"write {_FORMS}")
        if not Path(file).parent.is_dir():
            raise UsageError(f"{url!r}: no directory {Path(file).parent}",
                             hint="create it, or name a file in an existing directory")
        return ClusterHandle(url, cluster, SqliteCoordinator(Path(file), clock=clock),
                             f"{cluster}/")
    raise UsageError(f"not a coordinator URL: {url!r}", hint=f"write {_FORMS}")
