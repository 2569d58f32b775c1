"""A node is the id its operator gave it (``nereus init --join --node-id n2``); a node
that runs ``--workers N`` is N members of the cluster named ``<node_id>-w<K>``, its
worker processes (``nereus.engine.hosting.workers.home.node_id``). Everything an operator reads
or types speaks of the node; its workers are shown under it. These functions tell one
from the other by the name alone, so they hold for a node that is not alive any more
(named only by a placement or a drain): ``init --join`` refuses a node id that ends like a
worker's, so ``<id>-w<K>`` is always worker K of node ``<id>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

WORKER_ID: Final = re.compile(r"(?P<node>.+)-w(?P<index>\d+)")
_WORKER_SOCKET: Final = re.compile(r"(?P<run>.*)/workers/\d+\.sock")


def node_of(member_id: str) -> str:
    """The node a member is: ``n2`` for ``n2-w1``; a one-process node is its own."""
    found = WORKER_ID.fullmatch(member_id)
    return member_id if found is None else found["node"]


def worker_index(member_id: str) -> int | None:
    """K for a worker ``<node_id>-w<K>``; None for a node run as one process."""
    found = WORKER_ID.fullmatch(member_id)
    return None if found is None else int(found["index"])


def looks_like_worker(node_id: str) -> bool:
    """Whether a node id would read as a worker of another node (``db-w1``)."""
    return WORKER_ID.fullmatch(node_id) is not None


def members_of(node_id: str, member_ids: Iterable[str]) -> list[str]:
    """The members that are node ``node_id``: itself, or its workers; ``node_id`` may
    also name one worker (``n2-w1``), which is then the only one."""
    return sorted(m for m in member_ids if m == node_id or node_of(m) == node_id)


def front_door_address(address: str) -> str:
    """A node's admin socket from one of its workers' (``<home>/run/workers/K.sock`` ->
    ``<home>/run/admin.sock``); any other address is the node's own."""
    found = _WORKER_SOCKET.fullmatch(address)
    return address if found is None else f"{found['run']}/admin.sock"
