"""How a cluster command reaches the cluster: ``--coordinator URL``, or the ``[cluster]``
of the home's own nereus.toml; and the options the cluster's operator actions share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.cli.commands.cluster.coordinator_security import CoordinatorSecurity

CoordinatorOpt = Annotated[str | None, typer.Option(
    "--coordinator", metavar="URL",
    help="The cluster: oxia://HOST:PORT/CLUSTER, etcd://HOST:PORT/CLUSTER or "
         "sqlite:///ABSOLUTE/PATH.db/CLUSTER "
         "(default: the [cluster] coordinator of this home's nereus.toml).")]
OperatorOpt = Annotated[str | None, typer.Option(
    "--as", "--operator", metavar="ID",
    help="Operator identity to record (default: the user running nereus).")]
ConfirmOpt = Annotated[bool, typer.Option(
    "--yes", "-y", help="Do not ask for confirmation (scripts; required without a terminal).")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Check and show what would be written; write nothing.")]


def coordinator_url(env: Env, given: str | None) -> str:
    """``given``, else the coordinator this home's ``[cluster]`` names."""
    from nereus.config import parse_config
    from nereus.errors import ConfigError, UsageError

    path = env.layout.config
    local = None
    if path.exists():
        try:
            local = parse_config(path.read_text(), source=str(path))
        except ConfigError:
            if not given:
                raise  # with --coordinator the home's file is only asked for TLS settings
    if local is not None and local.cluster is not None:
        from nereus.adapters.cluster.home_config import use_coordinator_security

        # this node's TLS and auth settings for its coordinator (only for that address)
        use_coordinator_security(local.cluster, home=path.parent)
    if given:
        return given
    hint = ("pass --coordinator URL, or run it from a node's home (`nereus init --join URL "
            "--node-id ID` makes one)")
    if local is None:
        raise UsageError(f"which cluster? {path} does not exist", hint=hint)
    if local.cluster is not None:
        return local.cluster.coordinator
    if env.layout.coordinator.exists():  # `engine start --workers N`: the home's own cluster
        from nereus.engine.hosting.workers.home import coordinator_url as workers_url

        return workers_url(env.home)
    raise UsageError(f"which cluster? {path} has no [cluster] table", hint=hint)


@contextmanager
def cluster_store(env: Env, given: str | None, *, create: bool = False,
                  security: CoordinatorSecurity | None = None) -> Iterator[ClusterStore]:
    """The cluster's records. Without ``create``, an embedded coordinator's file must
    exist already (reading a cluster never leaves a new, empty file behind). ``security``:
    the command line's TLS and auth options (default: the running command's, when it
    ``takes_coordinator_security``), which replace the home's for that address."""
    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.adapters.cluster.coordinator_url import open_cluster
    from nereus.adapters.cluster.home_config import use_coordinator_security
    from nereus.cli.commands.cluster.coordinator_security import given_security
    from nereus.cluster.errors import ClusterNotInitialised
    from nereus.config.url_credentials import refuse_credentials

    url = coordinator_url(env, given)
    refuse_credentials(url)  # before any message names the URL
    security = security or given_security()
    settings = None if security is None else security.settings(url)
    if settings is not None:
        use_coordinator_security(settings, home=env.layout.root)
    parts = urlsplit(url)
    if not create and parts.scheme == "sqlite" and parts.path.startswith("/"):
        file = Path(parts.path.rpartition("/")[0])
        if file.parent.is_dir() and not file.exists():
            raise ClusterNotInitialised(url)
    handle = open_cluster(url)
    try:
        yield ClusterStore(handle)
    finally:
        handle.close()


def now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000
