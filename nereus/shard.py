"""Shard identity: one Ingress Route partition = one Shard Log = one Delay Shard.

A shard is named ``route/partition`` (``default/3``). The partition of a message is a
stable hash of its delayMessageId, so every command for one message reaches the same
shard, on every machine and every Python version (no ``hash()``, which is salted). A
keyed message of an ORDERED lane is placed by the same hash of its ordering key instead,
so one key's messages share one shard and its order holds across the whole route.
"""

from __future__ import annotations

import re

import msgspec

from nereus.errors import UsageError

_ROUTE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ShardId(msgspec.Struct, frozen=True, order=True):
    """The name of one Delay Shard (a Struct: defined in a fiftieth of a dataclass's time,
    and every command line defines it)."""

    route: str
    partition: int

    def __str__(self) -> str:
        return f"{self.route}/{self.partition}"

    @classmethod
    def parse(cls, text: str, *, default_route: str = "default") -> ShardId:
        """Parse ``route/partition`` or a bare partition number (on the default route)."""
        route, _, part = text.rpartition("/")
        route = route or default_route
        if not _ROUTE.match(route) or not part.isdigit():
            raise UsageError(
                f"invalid shard {text!r}",
                hint="name a shard as ROUTE/PARTITION, for example default/0",
            )
        return cls(route, int(part))


def validate_route_name(name: str) -> str:
    """Return ``name`` if it is a usable route name, else raise UsageError."""
    if not _ROUTE.match(name):
        raise UsageError(
            f"invalid route name {name!r}",
            hint="use 1-64 characters from A-Z a-z 0-9 . _ - starting with a letter or digit",
        )
    return name


def partition_for(delay_message_id: str, partitions: int) -> int:
    """The partition that owns ``delay_message_id`` on a route with ``partitions``."""
    import hashlib  # here, not at the top: it loads OpenSSL, which `shard inspect` never needs

    digest = hashlib.blake2b(delay_message_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions
