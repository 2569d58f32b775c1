"""How a shard owner becomes the live owner: the recovery ``ShardLoop`` runs on start.

1. ``activate``: replay from the stored applied position, raise the clock's floor to the
   latest applied decision, drop local claims, append an ACTIVATION_BARRIER at the next
   epoch (in a cluster the granted one, which must be above the applied epoch, else
   ``Ownership.stale_grant`` names it and the node raises the counter) and wait until it is
   applied (if another owner's barrier won, the loop is fenced);
2. ``settle_orphans``: every attempt still PUBLISHING gets its outcome. On a lane whose
   destination fences its writers (``orphan_proofs``) the fence proves it PUBLISHED or
   NOT_PUBLISHED; anywhere else it becomes UNKNOWN (no first-send gate survives a
   restart: never retried automatically, never called NOT_PUBLISHED without a proof);
3. ``replicate_lane_policy`` (``lane_policy``); only then does the loop accept work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.engine.shard.lane_policy import LanePolicies, policy_records, report
from nereus.engine.shard.orphan_proofs import Fences, Mac, Proofs, prove_orphans
from nereus.engine.shard.outbox import Outbox
from nereus.engine.shard.ownership import Ownership, applied_activation, describe_live
from nereus.records import (
    ActivationBarrier,
    AttemptState,
    Disposition,
    Outcome,
    PublishOutcome,
    encode,
)
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, Obligation, decode_value


class Recovery:
    """One owner activating one shard; the steps run in the order above."""

    def __init__(self, shard: ShardId, runner: ShardRunner, outbox: Outbox,
                 ownership: Ownership, *, clock: TrustedClock, new_id: Callable[[], str],
                 events: EventLog) -> None:
        self._shard = shard
        self._store = runner.store
        self._runner = runner
        self._outbox = outbox
        self._ownership = ownership
        self._clock = clock
        self._new_id = new_id
        self._events = events
        self.replayed = 0  # records the replay applied before the barrier was appended

    def activate(self) -> str | None:
        """Replay and apply our ACTIVATION_BARRIER at the next fencing epoch; None once
        this owner is the live owner, else why its barrier was fenced."""
        store, runner, ownership = self._store, self._runner, self._ownership
        self.replayed = runner.run_until_caught_up()
        if (decided_ms := latest_decision_ms(store)) > 0:
            self._clock.raise_floor(decided_ms)
        forget_claims(store)
        previous = applied_activation(store)
        last = previous.fencing_epoch if previous else 0
        granted = ownership.granted_epoch
        if granted is not None and granted <= last:
            ownership.stale_grant = last
            return (f"the coordinator granted epoch {granted}, not above the applied epoch "
                    f"{last} ({describe_live(previous)})")
        epoch = ownership.epoch = last + 1 if granted is None else granted
        barrier_id = self._new_id()
        (receipt,) = self._outbox.append([encode(ActivationBarrier(
            barrier_id=barrier_id, owner_id=ownership.owner_id, fencing_epoch=epoch))])
        runner.run_until_caught_up(stop_at=receipt.position)
        active = applied_activation(store)
        if active is None or active.barrier_id != barrier_id:
            return (f"its activation barrier (epoch {epoch}) was fenced; the live owner is "
                    f"{describe_live(active)}")
        return None

    def settle_orphans(self, fences: Mapping[str, Fences] | None = None,
                       mac: Mac | None = None) -> list[Obligation]:
        """Append and apply a PUBLISH_OUTCOME for every attempt still PUBLISHING: what the
        lanes' ``fences`` prove (with ``mac``, each attempt's evidence MAC), else UNKNOWN.
        Returns every obligation still open (their keys hold the ordered head)."""
        obligations = open_obligations(self._store)
        orphans = [o.attempt_id for _, o in obligations if o.state == AttemptState.PUBLISHING]
        proofs = Proofs() if fences is None or mac is None else \
            prove_orphans(self._store, self._shard, orphans, fences, mac)
        records = orphan_outcomes(obligations, proofs, owner_id=self._ownership.owner_id,
                                  epoch=self._ownership.epoch, new_id=self._new_id)
        if records:
            self._outbox.append(records)
            self._runner.run_until_caught_up()
        if unknown := len(records) - len(proofs.proven):
            safe_event(self._events, "recovered_unknown", shard=str(self._shard),
                       attempts=unknown)
        if proofs.proven:
            safe_event(self._events, "orphans_proven", shard=str(self._shard),
                       attempts=len(proofs.proven),
                       not_published=sum(p.outcome == Outcome.NOT_PUBLISHED
                                         for p in proofs.proven.values()))
        for lane, why in proofs.unproven.items():
            safe_event(self._events, "orphans_unproven", level="warning",
                       shard=str(self._shard), lane=lane, reason=why)
        for lane, why in proofs.not_fenced.items():  # nothing was at stake this time
            safe_event(self._events, "lane_not_fenced", shard=str(self._shard), lane=lane,
                       reason=why)
        return [obligation for _, obligation in open_obligations(self._store)] \
            if proofs.proven else [obligation for _, obligation in obligations]

    def replicate_lane_policy(self, policies: LanePolicies) -> None:
        """Replicate each configured lane's handoff lead, ordering and limits into its
        policy, and log what became of each change (``lane_policy``)."""
        records = policy_records(self._store, policies, owner_id=self._ownership.owner_id,
                                 epoch=self._ownership.epoch)
        if not records:
            return
        self._outbox.append([encode(record) for _, _, record in records])
        self._runner.run_until_caught_up()
        report(self._store, records, shard=self._shard, events=self._events)


def latest_decision_ms(store: ShardStore) -> int:
    """The latest Trusted UTC decision an applied admission carries (0 if none): true
    time is at least that, whatever the wall clock says after a restart."""
    decided = [decode_value(raw, Lane).last_decided_ms for _, raw in store.scan_prefix(keys.LANE)]
    return max(decided, default=0)


def forget_claims(store: ShardStore) -> None:
    """Drop every local claim row (unsynced: claims are local state; none survives)."""
    store.write({key: None for key, _ in store.scan_prefix(keys.CLAIM)}, sync=False)


def open_obligations(store: ShardStore) -> list[tuple[str, Obligation]]:
    """Every open obligation (PUBLISHING or UNKNOWN attempt) with its message's id."""
    return [(key[1:].split(b"\x00", 1)[0].decode(), decode_value(raw, Obligation))
            for key, raw in store.scan_prefix(keys.OBLIGATION)]


def orphan_outcomes(obligations: list[tuple[str, Obligation]], proofs: Proofs, *,
                    owner_id: str, epoch: int, new_id: Callable[[], str]) -> list[bytes]:
    """A PUBLISH_OUTCOME for every attempt still PUBLISHING: its proof when a fence gave
    one, else UNKNOWN (the send may have happened, and no live first-send gate survived
    the restart)."""
    unknown = (f"recovery: owner {owner_id} activated epoch {epoch}; no live first-send "
               "gate survived the restart, the send may have happened")
    records = []
    for delay_message_id, obligation in obligations:
        if obligation.state != AttemptState.PUBLISHING:
            continue
        proven = proofs.proven.get(obligation.attempt_id)
        records.append(encode(PublishOutcome(
            outcome_id=new_id(), attempt_id=obligation.attempt_id,
            delay_message_id=delay_message_id, owner_id=owner_id, fencing_epoch=epoch,
            outcome=Outcome.UNKNOWN if proven is None else proven.outcome,
            disposition=Disposition.NONE if proven is None else proven.disposition,
            evidence=unknown if proven is None else proven.evidence)))
    return records
