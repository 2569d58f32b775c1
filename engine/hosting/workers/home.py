"""Where the worker processes of one home live: their coordinator, each worker's node
id, admin socket and log, and the configuration each one runs with.

A standalone home (no ``[cluster]``): the front door writes the home's shared tables
(routes, lanes, shard limits, objects, checkpoints) as the configuration record of the
home's embedded cluster (``<home>/coordinator.db``, cluster ``workers``), so ``nereus
cluster status`` and later tools read what the workers run; each worker runs the home's
own configuration with a ``[cluster]`` of its own: the embedded coordinator, its node id
``worker-<K>``, a short session TTL (all members are on this host, so a dead worker's
shards move on within seconds).

A node of a cluster (``[cluster]`` in ``nereus.toml``): each worker is a member of that
cluster, the coordinator the home names, with the node's settings and the node id
``<node_id>-w<K>``; the configuration stays the cluster's own record.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec

from nereus.adapters.cluster.coordinator_url import sqlite_url
from nereus.cluster.errors import NodeIdInUseElsewhere
from nereus.cluster.records import Member
from nereus.config import CLUSTER_TABLES, ClusterSettings, Config, parse_config, tables_of
from nereus.errors import ConfigError
from nereus.layout import HomeLayout

CLUSTER: Final = "workers"  # the cluster's name in <home>/coordinator.db
SESSION_TTL_MS: Final = 3_000
LEASE_MARGIN_MS: Final = 1_000
NODE_ID_MAX: Final = 64  # ClusterSettings.node_id's pattern
_HEADER: Final = re.compile(r"^\s*\[\[?\s*\"?([A-Za-z0-9_-]+)")


def coordinator_url(home: Path) -> str:
    """The embedded coordinator of a standalone home's worker processes."""
    return sqlite_url(HomeLayout(home).coordinator, CLUSTER)


def worker_coordinator(config: Config, home: Path) -> str:
    """The coordinator the home's workers are members of."""
    return coordinator_url(home) if config.cluster is None else config.cluster.coordinator


def node_id(config: Config, index: int) -> str:
    """Worker ``index``'s node id: ``worker-<K>``, or ``<node_id>-w<K>`` on a node."""
    if config.cluster is None:
        return f"worker-{index}"
    name = f"{config.cluster.node_id}-w{index}"
    if len(name) > NODE_ID_MAX:
        raise ConfigError(f"{config.source}: node id {config.cluster.node_id!r} is too long "
                          f"for worker node ids like {name!r} (at most {NODE_ID_MAX} "
                          "characters)", hint="join again with a shorter --node-id, or start "
                          "the engine with --workers 1")
    return name


def is_home_member(config: Config, member_id: str) -> bool:
    """Whether ``member_id`` is this home's node of a cluster, or one of its workers when
    it runs ``--workers N`` (``node_id``)."""
    if config.cluster is None:
        return False
    return is_namesake(config.cluster.node_id, member_id)


def is_namesake(node_id: str, member_id: str) -> bool:
    """Whether ``member_id`` is the node ``node_id`` run as one process or as workers."""
    return member_id == node_id or re.fullmatch(rf"{re.escape(node_id)}-w\d+",
                                                member_id) is not None


def live_namesakes(members: Mapping[str, Member], node_id: str, *,
                   home: Path | None = None, host: str | None = None) -> list[Member]:
    """The live members that are node ``node_id`` (as one process or as its workers),
    except those served from ``home`` on ``host``: a previous run of this home, whose
    session has not ended yet (its records go when it does)."""
    run = None if home is None else HomeLayout(home).run.resolve()
    return [member for name, member in sorted(members.items())
            if is_namesake(node_id, name) and not (
                run is not None and member.host == host
                and Path(member.address).resolve().is_relative_to(run))]


def refuse_namesakes(members: Mapping[str, Member], node_id: str, *, home: Path,
                     host: str) -> None:
    """``NodeIdInUseElsewhere`` naming the live node if another home runs as node
    ``node_id``: two homes under one id would take each other's shards' records."""
    taken = live_namesakes(members, node_id, home=home, host=host)
    if taken:
        raise NodeIdInUseElsewhere(taken[0].node_id, describe_member(taken[0]))


def describe_member(member: Member) -> str:
    """A member as the operator finds it: its host, pid and admin socket."""
    return f"{member.host} pid {member.pid}, admin {member.address}"


def worker_socket(home: Path, index: int) -> Path:
    """Worker ``index``'s own admin socket (the front door forwards to it)."""
    return HomeLayout(home).run / "workers" / f"{index}.sock"


def worker_log(index: int) -> str:
    """The name of worker ``index``'s log file in ``<home>/log``."""
    return f"worker-{index}.log"


def worker_config(config: Config, home: Path, index: int) -> Config:
    """The home's configuration as worker ``index`` runs it: a member of the home's
    embedded cluster, or of the cluster the home is a node of."""
    if config.cluster is not None:
        return dataclasses.replace(config, cluster=msgspec.structs.replace(
            config.cluster, node_id=node_id(config, index)))
    return dataclasses.replace(config, cluster=ClusterSettings(
        coordinator=coordinator_url(home), node_id=node_id(config, index),
        session_ttl_ms=SESSION_TTL_MS, lease_margin_ms=LEASE_MARGIN_MS))


def shared_text(text: str, *, source: str) -> str:
    """The tables of a home's ``nereus.toml`` that a cluster shares (``CLUSTER_TABLES``),
    as TOML text; checked to parse and to hold every shared table of ``text``."""
    kept: list[str] = []
    keep = False
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header is not None:
            keep = header.group(1) in CLUSTER_TABLES
        if keep:
            kept.append(line)
    shared = "\n".join(kept).strip() + "\n"
    wanted = [name for name in tables_of(text, source=source) if name in CLUSTER_TABLES]
    if sorted(tables_of(shared, source=source)) != sorted(wanted):
        raise ConfigError(f"{source}: its shared tables could not be told apart from the rest",
                          hint="write each table under its own [header]")
    parse_config(shared, source=f"{source} (shared tables)")
    return shared
