"""``[cluster]`` and ``[metrics]``: what belongs to this node alone — its membership of a
cluster (``ClusterSettings``) and its Prometheus listener (``MetricsSettings``, whose
``listen`` has the form ``LISTEN``)."""

from __future__ import annotations

import re
from typing import Annotated, Final

import msgspec


class ClusterSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[cluster]``: this home is one node of a cluster whose configuration (routes, lanes,
    object store, checkpoints, shard limits) lives in the coordinator."""

    coordinator: str  # oxia://HOST:PORT/[NS/]CLUSTER | etcd://HOST:PORT/CLUSTER | sqlite:///ABS/PATH.db/CLUSTER
    node_id: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    capacity: Annotated[int, msgspec.Meta(ge=0, le=1_000)] = 1  # placement weight; 0: none
    session_ttl_ms: Annotated[int, msgspec.Meta(ge=1_000, le=600_000)] = 10_000
    # no producer call once the session is alive for less than this much longer
    lease_margin_ms: Annotated[int, msgspec.Meta(ge=100, le=60_000)] = 2_000
    host: str = ""  # how other hosts reach this node (default: the host name)
    # keep a warm copy of the shards this node stands by for (``nereus/cluster/standby.py``),
    # so a failover here replays only the log's tail
    standby: bool = True
    # a coordinator over TLS (etcd: https; Oxia: gRPC over TLS), trusting only the CA of
    # its certificate, with a client certificate when it requires one; etcd's own auth (a
    # user and its password, by reference; not for Oxia, which has none)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    password_env: str | None = None
    # the cluster's sealing key (64 hex digits, the same on every node): route evidence
    # keys are kept in the coordinator sealed under it (``adapters/cluster/evidence_seal.py``)
    evidence_seal_key_file: str | None = None
    evidence_seal_key_env: str | None = None
    # while the sealing key is changed: the one before it, which still opens records not yet
    # re-sealed (``nereus cluster reseal-evidence-keys``; never seals)
    evidence_seal_previous_key_file: str | None = None
    evidence_seal_previous_key_env: str | None = None


LISTEN: Final = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):[0-9]{1,5}")


class MetricsSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[metrics]``: the Prometheus exposition over HTTP (opt-in; ``nereus metrics`` reads
    the same text through the admin socket whether or not it is set)."""

    # HOST:PORT the engine serves GET /metrics on (e.g. "127.0.0.1:9464"; an IPv6 host in
    # brackets: "[::1]:9464"); unset: no listener. Checked by parse_config (LISTEN).
    listen: str | None = None

    @property
    def address(self) -> tuple[str, int] | None:
        """``listen`` as (host, port); a bracketed IPv6 host loses its brackets."""
        if self.listen is None:
            return None
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)
