"""Where a large payload's object lives in the object store.

Every object of one shard is under that shard's own prefix,
``payloads/<route>/<partition>/<payload id>``: the client uploads there, and the state
machine refuses a PAYLOAD_COMMIT that names an object under another prefix. So the objects
one shard can ever reference are known from their keys alone, and a node of a cluster can
collect the payloads of the shards it owns without seeing the other nodes' shards.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = "payloads/"


def shard_prefix(route: str, partition: int) -> str:
    """The prefix of every payload object of shard ``route/partition`` (ends with ``/``)."""
    return f"{PREFIX}{route}/{partition}/"


def object_key(route: str, partition: int, payload_id: str) -> str:
    """The key a client uploads payload ``payload_id`` of shard ``route/partition`` to."""
    return shard_prefix(route, partition) + payload_id


def shard_of(key: str) -> tuple[str, int] | None:
    """The ``(route, partition)`` whose prefix ``key`` is under, with a name after it
    (None: under none; ``payloads/r/00/x`` is under none, as no shard's prefix is that)."""
    route, _, rest = key.removeprefix(PREFIX).partition("/")
    partition, _, name = rest.partition("/")
    if not (route and partition.isdigit() and name):
        return None
    found = route, int(partition)
    return found if key.startswith(shard_prefix(*found)) else None
