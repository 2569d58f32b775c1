"""A home's configuration: its own ``nereus.toml``, and, for a cluster node, the cluster's
configuration from the coordinator.

A node's ``nereus.toml`` keeps only node-local tables (``[engine]``, ``[cluster]``,
``[metrics]``); the
cluster's record keeps the others (routes, lanes, shard limits, object store,
checkpoints). The two texts are read as one file, so every rule of ``parse_config``
holds for the result and an error names where the offending key came from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from nereus.config import CLUSTER_TABLES, NODE_TABLES, Config, parse_config, tables_of
from nereus.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from nereus.config import ClusterSettings


def check_node_text(text: str, *, source: str) -> None:
    """A node's own file may hold only node-local tables."""
    shared = [name for name in tables_of(text, source=source) if name not in NODE_TABLES]
    if shared:
        raise ConfigError(
            f"{source}: [{', '.join(shared)}] belong to the cluster's configuration, not to "
            "a node's own file",
            hint="change the cluster's configuration in the coordinator (`nereus cluster "
                 "init --from FILE.toml` wrote it); keep only [engine], [cluster] and "
                 "[metrics] here")


def check_cluster_text(text: str, *, source: str) -> Config:
    """The cluster's configuration may hold only shared tables, and must be shareable by
    nodes on several hosts (Shard Logs on a broker, checkpoints in a shared store)."""
    local = [name for name in tables_of(text, source=source) if name not in CLUSTER_TABLES]
    if local:
        raise ConfigError(
            f"{source}: [{', '.join(local)}] are a node's own settings, not the cluster's",
            hint=f"keep [{', '.join(local)}] in each node's nereus.toml")
    config = parse_config(text, source=source)
    on_files = sorted(name for name, route in config.routes.items() if route.log == "file")
    if on_files:
        raise ConfigError(
            f"{source}: route(s) {', '.join(on_files)} keep their Shard Log in files of one "
            "home; a cluster's nodes share their Shard Logs",
            hint='use log = "kafka" or log = "pulsar" for a cluster\'s routes')
    if config.objects.store == "file" and not (config.objects.path
                                               and Path(config.objects.path).is_absolute()):
        raise ConfigError(
            f"{source}: [objects] in each node's home cannot hold the checkpoints every node "
            "restores from",
            hint='use store = "s3", or store = "file" with an absolute path every node shares')
    return config


def load_home_config(config_path: Path) -> Config:
    """The configuration the engine and the CLI of this home work with; from now on this
    process dials each ``[kafka.NAME]`` and ``[pulsar.NAME]`` cluster with its settings."""
    from nereus.adapters.backends.kafka.kafka_security import use_connections
    from nereus.adapters.backends.pulsar.pulsar_security import use_pulsar_connections

    config = _home_config(config_path)
    use_connections(config.kafka.values(), home=config_path.parent)
    use_pulsar_connections(config.pulsar.values(), home=config_path.parent)
    return config


def _home_config(config_path: Path) -> Config:
    source = str(config_path)
    text = config_path.read_text()
    local = parse_config(text, source=source)
    if local.cluster is None:
        return local
    check_node_text(text, source=source)
    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.adapters.cluster.coordinator_url import open_cluster

    use_coordinator_security(local.cluster, home=config_path.parent)

    handle = open_cluster(local.cluster.coordinator)
    try:
        shared = ClusterStore(handle).require_config()
    finally:
        handle.close()
    return parse_config(shared.toml.rstrip("\n") + "\n\n" + text,
                        source=f"{source} + the cluster's configuration r{shared.revision} "
                               f"({local.cluster.coordinator})")


def use_coordinator_security(cluster: ClusterSettings, *, home: Path) -> None:
    """From now on this process reaches ``cluster``'s coordinator with the TLS and auth
    settings of its ``[cluster]`` (etcd: TLS, client certificate, user; Oxia: TLS, client
    certificate)."""
    from nereus.adapters.backends.coordination.etcd_security import use_etcd_security
    from nereus.adapters.backends.coordination.oxia_security import use_oxia_security

    use_etcd_security(cluster, home=home)
    use_oxia_security(cluster, home=home)


_TABLE = re.compile(r"^\s*\[")  # a line opening a table
_CLUSTER_TABLE = re.compile(r"^\s*\[\s*cluster\s*\]\s*(#.*)?$")


def with_cluster_lines(text: str, replaced: Iterable[str], lines: str, *, source: str) -> str:
    """A node's ``nereus.toml`` text whose ``[cluster]`` table has no line setting any of
    ``replaced`` and has ``lines`` (``key = value`` lines) right below its header; every
    other line as it was. ``ConfigError`` when there is no ``[cluster]`` table."""
    setting = re.compile(r"^\s*(" + "|".join(map(re.escape, replaced)) + r")\s*=")
    kept: list[str] = []
    inside = found = False
    for line in text.splitlines(keepends=True):
        if _TABLE.match(line):
            inside = bool(_CLUSTER_TABLE.match(line))
            kept.append(line)
            if inside and not found:
                found = True
                kept.append(lines if line.endswith("\n") else "\n" + lines)
            continue
        if not (inside and setting.match(line)):
            kept.append(line)
    if not found:
        raise ConfigError(f"{source}: no [cluster] table", hint="`nereus init --join URL "
                          "--node-id ID` makes a node's home")
    return "".join(kept)


def with_coordinator(text: str, url: str, *, source: str, check: bool = True) -> str:
    """A node's ``nereus.toml`` text naming coordinator ``url`` in its ``[cluster]``; every
    other line as it was (comments too). ``ConfigError`` when the file does not say
    ``coordinator = "..."`` on a line of its own in ``[cluster]``, or (``check``) when the
    text is not then a valid configuration naming ``url``."""
    import json

    line_of = re.compile(r"""^(\s*coordinator\s*=\s*)("(?:[^"\\]|\\.)*"|'[^']*')(.*)$""")
    lines = text.splitlines(keepends=True)
    inside = False
    for number, line in enumerate(lines):
        if _TABLE.match(line):
            inside = bool(_CLUSTER_TABLE.match(line))
            continue
        found = line_of.match(line.rstrip("\r\n")) if inside else None
        if found is not None:
            ending = line[len(line.rstrip("\r\n")):]
            lines[number] = found[1] + json.dumps(url) + found[3] + ending
            rewritten = "".join(lines)
            if not check:
                return rewritten
            parsed = parse_config(rewritten, source=source)
            if parsed.cluster is None or parsed.cluster.coordinator != url:
                break
            return rewritten
    raise ConfigError(f"{source}: no line `coordinator = \"...\"` in its [cluster] table to "
                      "rewrite", hint=f'write coordinator = "{url}" under [cluster] by hand')
