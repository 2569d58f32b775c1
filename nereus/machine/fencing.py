"""Fencing: which owner's system mutations count (seed 000 §2-§4).

The live owner is the one whose ACTIVATION_BARRIER was applied last (``meta/activation``).
A system mutation is *current* only when it names exactly that owner and epoch: an older
epoch, an equal epoch from another owner (the first barrier applied won), or a newer one
(not yet activated) is fenced, and with no activation nothing is current. A fenced
admission or claim result is refused (local judgement); a fenced outcome is evidence only
(PUBLISHED with evidence settles, anything else is kept on the attempt, never a
downgrade); a fenced checkpoint mark is kept for the audit trail. ``barrier_fenced``
judges barriers.
"""

from __future__ import annotations

from nereus.machine.tx import Tx
from nereus.state.values import Activation


def fenced(tx: Tx, owner_id: str, fencing_epoch: int) -> str | None:
    """Why ``owner_id`` at ``fencing_epoch`` is not the live owner, or None if it is."""
    return _judge(tx.activation(), owner_id, fencing_epoch)


def _judge(active: Activation | None, owner_id: str, epoch: int) -> str | None:
    if active is None:
        return "no owner has activated this shard (no ACTIVATION_BARRIER applied)"
    if epoch < active.fencing_epoch:
        return (f"owner {owner_id} epoch {epoch} is older than the live owner "
                f"{active.owner_id} epoch {active.fencing_epoch}")
    if epoch > active.fencing_epoch:
        return (f"owner {owner_id} epoch {epoch} was never activated (the live owner is "
                f"{active.owner_id} epoch {active.fencing_epoch})")
    if owner_id != active.owner_id:
        return (f"owner {owner_id} is not the live owner {active.owner_id} of epoch {epoch}")
    return None


def barrier_fenced(tx: Tx, owner_id: str, fencing_epoch: int) -> str | None:
    """Why a barrier may not make ``owner_id`` live at ``fencing_epoch``, or None.

    A newer epoch takes over; the same owner at its own epoch re-activates (a recovery that
    appended its barrier twice); anything else is fenced.
    """
    active = tx.activation()
    if active is None or fencing_epoch > active.fencing_epoch:
        return None
    if fencing_epoch == active.fencing_epoch and owner_id == active.owner_id:
        return None
    return _judge(active, owner_id, fencing_epoch)
