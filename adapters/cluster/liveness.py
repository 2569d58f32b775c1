"""Whether a shard's owner is still there, before its records say otherwise.

An owner's records live on its coordinator session and go only when the lease ends, up to
a TTL after it died. Two things tell sooner: **the lease** — where the coordinator says
how long a session has left (``SessionClock``: SQLite, etcd), a live holder never falls
more than one heartbeat interval below the TTL, so below ``TTL - 1.5 intervals`` the owner
is lost and the time left is how long until its records go; and **this host** — a member
on this host whose ``pid`` no longer runs is lost at once. A pid taken by another process
counts as alive (the lease still tells); on Oxia, which does not describe sessions, only
this host can tell.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass

from nereus.adapters.cluster.cluster_store import ClusterStore, Owned
from nereus.cluster.records import Member
from nereus.coordination.errors import CoordinationError
from nereus.coordination.protocol import SessionClock, SessionTime
from nereus.shard import ShardId

_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True, slots=True)
class OwnerHealth:
    """A shard's owner as far as can be told now."""

    lost: bool
    lease_left_ms: int | None  # its session's time left (None: the coordinator does not say)
    why: str | None  # why it counts as lost


def owner_health(store: ClusterStore, owners: dict[ShardId, Owned],
                 members: dict[str, Member]) -> dict[ShardId, OwnerHealth]:
    """Each owned shard's ``OwnerHealth`` (one session look-up per owner session)."""
    clock = store.handle.coordinator
    times: dict[int, SessionTime | None] = {}
    out: dict[ShardId, OwnerHealth] = {}
    for shard, owned in owners.items():
        session = owned.version.session_id
        if session is not None and session not in times:
            times[session] = _session_time(clock, session)
        found = None if session is None else times[session]
        out[shard] = judge(found, members.get(owned.record.node_id))
    return out


def judge(time: SessionTime | None, member: Member | None) -> OwnerHealth:
    """The rules of the module's docstring for one owner."""
    left = None if time is None else max(time.left_ms, 0)
    if member is not None and is_local(member.host) and member.pid and not _runs(member.pid):
        return OwnerHealth(lost=True, lease_left_ms=left,
                           why=f"its process (pid {member.pid} on {member.host}) is gone")
    if time is not None:
        interval_ms = time.ttl_ms // max(time.heartbeats_per_ttl, 1)
        silent_ms = time.ttl_ms - time.left_ms
        if silent_ms > interval_ms * 3 // 2:
            return OwnerHealth(lost=True, lease_left_ms=left,
                               why=f"its coordinator session has had no heartbeat for "
                                   f"about {silent_ms / 1000:.0f} s")
    return OwnerHealth(lost=False, lease_left_ms=left, why=None)


def is_local(host: str) -> bool:
    """Whether a member's ``host`` is this host."""
    return host in _LOCAL_NAMES or host == socket.gethostname()


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        return True
    return True


def _session_time(coordinator: object, session_id: int) -> SessionTime | None:
    if not isinstance(coordinator, SessionClock):
        return None
    with contextlib.suppress(CoordinationError):
        return coordinator.session_time(session_id)
    return None
