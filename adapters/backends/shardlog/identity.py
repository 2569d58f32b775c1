"""Route identity: the first record of every Shard Log partition says whose log it is.

``ensure_route_identity`` runs before an engine starts on a shard and before a client
appends to one: an empty log gets the ROUTE_IDENTITY (route id from ``nereus init``, name,
partition, partition count) as its first record; a log whose first record is another
identity, or not an identity, is refused naming the log and what it found — a home never
adopts someone else's log, and ``partitions`` never changes under data. A log pruned below
its first record is checked against the identity the shard applied (``meta/route``).
"""

from __future__ import annotations

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.errors import NereusError
from nereus.records import DecodeFailure, RouteIdentity, decode, encode, kind_of


class RouteMismatch(NereusError):
    """A Shard Log (or shard) belongs to another route identity than the configuration's."""


def describe(identity: RouteIdentity) -> str:
    return (f"route {identity.route} id {identity.route_id or '(none)'}, partition "
            f"{identity.partition} of {identity.partitions}")


def _refuse(where: str, found: RouteIdentity, expected: RouteIdentity,
            source: str) -> RouteMismatch:
    if (found.route_id, found.route) == (expected.route_id, expected.route) and \
            found.partitions != expected.partitions:
        return RouteMismatch(
            f"{where} belongs to route {found.route} with {found.partitions} partitions; "
            f"{source} says partitions = {expected.partitions}",
            hint="the partition count of a route cannot change once it holds data: message "
            f"ids would move to other shards. Set partitions = {found.partitions} again "
            "(or create a new route for the new count)")
    return RouteMismatch(
        f"{where} holds {describe(found)}, not this home's {describe(expected)}",
        hint="another home's log: give this route its own topic, or run `nereus init "
        "--attach` to share that route on purpose")


def first_identity(log: ShardLog) -> tuple[RouteIdentity | None, str | None]:
    """(the identity at the head of the log, None) or (None, why there is none there).

    (None, None) means the log is empty; for a dense log whose first record is gone
    (pruned), the answer is (None, "pruned")."""
    records = log.read(0, 1)
    if not records:
        return None, None
    first = records[0]
    if log.dense and first.position != 0:
        return None, "pruned"
    found = decode(first.payload)
    if isinstance(found, DecodeFailure):
        return None, f"its first record (position {first.position}) is not readable: " \
            f"{found.detail}"
    if not isinstance(found, RouteIdentity):
        return None, f"its first record (position {first.position}) is {kind_of(found)}, " \
            "not a ROUTE_IDENTITY"
    return found, None


def ensure_route_identity(log: ShardLog, expected: RouteIdentity, *, where: str,
                          applied: RouteIdentity | None = None,
                          source: str = "nereus.toml") -> None:
    """Refuse ``log`` unless it is ``expected``'s; write the identity into an empty log.

    ``applied``: the identity the shard's database applied (``meta/route``), if any."""
    if applied is not None and applied != expected:
        raise _refuse(f"the database of shard {expected.route}/{expected.partition}",
                      applied, expected, source)
    found, problem = first_identity(log)
    if found is None and problem is None:
        log.append([encode(expected)])
        found, problem = first_identity(log)  # another writer may have been first
    if problem == "pruned":
        return  # the head is gone; ``applied`` was the evidence
    if found is None:
        raise RouteMismatch(
            f"{where} is not a log of this route: {problem}",
            hint="point the route at its own topic (a log made by another tool, or by a "
            "Nereus build from before route identities, cannot be adopted)")
    if found != expected:
        raise _refuse(where, found, expected, source)
