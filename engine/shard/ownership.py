"""A shard owner's standing: the fencing epoch it activated, and whether it is still live.

The live owner is whoever's ACTIVATION_BARRIER was applied last (``meta/activation``), not
what this process remembers: once another owner's barrier is applied, this one sends
nothing more (the lane publisher asks ``live_owner_gate`` just before every producer call)
and lets the shard go. ``fenced`` says why, once this owner knows it.
"""

from __future__ import annotations

from typing import Protocol

from nereus.engine.scheduler.round_plan import Owner
from nereus.records import ActivationBarrier
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Activation, decode_value


def applied_activation(store: ShardStore) -> Activation | None:
    """The last applied ACTIVATION_BARRIER's owner and epoch (None before the first)."""
    raw = store.get(keys.META_ACTIVATION)
    return None if raw is None else decode_value(raw, Activation)


def describe_live(active: Activation | None) -> str:
    """Who the live owner is, in words."""
    return "nobody" if active is None else f"{active.owner_id} epoch {active.fencing_epoch}"


class LeaseGate(Protocol):
    """Whether the coordinator session an owner holds its shards under is certainly alive
    (a cluster node's; a standalone engine has none)."""

    def lease_problem(self) -> str | None:
        """Why no producer call may be made under the session now, or None."""
        ...


class Ownership:
    """This owner on one shard: its id, the epoch it activated (0 before recovery), and,
    once another owner is live, why (``fenced``).

    In a cluster the epoch is granted: the shard's epoch counter in the coordinator, which
    its take incremented (``granted_epoch``), and every producer call also needs the
    node's session to be certainly alive (``lease``). A grant not above the epoch the
    shard's log has applied is refused; ``stale_grant`` then keeps that applied epoch, so
    the node can raise the counter above it."""

    def __init__(self, owner_id: str, store: ShardStore, *, lease: LeaseGate | None = None,
                 granted_epoch: int | None = None) -> None:
        self.owner_id = owner_id
        self.epoch = 0
        self.fenced: str | None = None
        self.lease = lease
        self.granted_epoch = granted_epoch
        self.stale_grant: int | None = None  # the applied epoch a refused grant was not above
        self._store = store
        # the store identity a claim records and the hand-over checks: this open of this
        # database (its path, and the handle this owner holds)
        self.store_id = f"{store.path}#{id(store):x}"

    def lease_problem(self) -> str | None:
        """Why this owner's coordinator session does not cover a producer call now."""
        return None if self.lease is None else self.lease.lease_problem()

    def owner(self) -> Owner:
        """Who a planner round claims for: this owner, its store and its epoch."""
        return Owner(self.owner_id, self.store_id, self.epoch)

    def is_rival(self, barrier: ActivationBarrier) -> bool:
        """An applied barrier that activates anyone but this owner at its epoch."""
        return (barrier.owner_id, barrier.fencing_epoch) != (self.owner_id, self.epoch)

    def live_owner_gate(self) -> str | None:
        """Why this owner may not call a producer now, or None.

        Read from the *applied* activation (``meta/activation``), not from memory: once
        another owner's barrier is applied, no further producer call leaves this owner.
        """
        if self.fenced is not None:
            return f"owner {self.owner_id} is fenced: {self.fenced}"
        if (lease := self.lease_problem()) is not None:
            return f"owner {self.owner_id}: {lease}"
        active = applied_activation(self._store)
        if active is None or (active.owner_id, active.fencing_epoch) != (self.owner_id,
                                                                         self.epoch):
            return (f"owner {self.owner_id} epoch {self.epoch} is not the live owner "
                    f"({describe_live(active)})")
        return None
