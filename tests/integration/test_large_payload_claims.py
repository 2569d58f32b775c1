"""Large payloads materialised at Claim (the Planner): the claim's template carries the
object's bytes and permits count them; a missing, corrupt or unattested object FAILS the
message; an unreachable object store (or none) leaves it due, and an ordered key waits."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable

import pytest

from nereus import records as r
from nereus.adapters.backends.objectstore.protocol import ObjectCorrupt, ObjectMissing
from nereus.engine.scheduler.admission import prepare_admission
from nereus.engine.scheduler.drr import DrrState
from nereus.engine.scheduler.payloads import FetchPayload
from nereus.engine.scheduler.permits import PermitLimits, Permits
from nereus.engine.scheduler.planner import Planner
from nereus.engine.scheduler.round_plan import Owner, PlannerSettings
from nereus.errors import ServiceUnreachable
from nereus.publish import template_digest
from nereus.records import MessageState
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, decode_value
from nereus.testing import MemoryShard
from nereus.trusted_time import TrustedTime
from tests.unit.builders import activate, op, schedule

OWNER = Owner("owner", "store", 1)
NOW = TrustedTime(10_000, 10_010)


def commit_payload(shard: MemoryShard, payload_id: str, data: bytes) -> str:
    """Reserve and commit ``data`` as ``payload_id``; returns its object key."""
    sha = hashlib.sha256(data).hexdigest()
    object_key = f"payloads/default/0/{payload_id}"
    shard.apply(r.PayloadReserve(command_id=f"pr-{payload_id}", payload_id=payload_id,
                                 size_bytes=len(data), sha256=sha, expires_at_ms=10**12))
    result = shard.result(r.PayloadCommit(command_id=f"pc-{payload_id}", payload_id=payload_id,
                                          size_bytes=len(data), sha256=sha,
                                          object_key=object_key))
    assert result.status == r.ResultStatus.APPLIED, result.detail
    return object_key


class FakeObjects:
    """A fetch_payload stub: bytes by key, or an exception to raise; counts calls."""

    def __init__(self, objects: dict[str, bytes | Exception]) -> None:
        self.objects = objects
        self.calls: list[str] = []

    def __call__(self, key: str) -> bytes:
        self.calls.append(key)
        found = self.objects.get(key, ObjectMissing(f"no object {key} in fake://"))
        if isinstance(found, Exception):
            raise found
        return found


def planner(store: ShardStore, fetch: FetchPayload | None, *,
            permits: Permits | None = None) -> Planner:
    counter = itertools.count()
    return Planner(store, permits or Permits(PermitLimits()), DrrState(),
                   PlannerSettings(quantum=16, max_deficit=32), lambda: f"id{next(counter)}",
                   fetch_payload=fetch)


def lanes(store: ShardStore, name: str = "local") -> dict[str, Lane]:
    raw = store.get(keys.lane_key(name))
    return {name: Lane(name=name) if raw is None else decode_value(raw, Lane)}


def test_a_committed_payload_is_materialised_into_the_template(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """The claim's template carries the object's bytes; permits and digest count them."""
    shard = MemoryShard()
    data = b"x" * 5_000
    object_key = commit_payload(shard, "p1", data)
    shard.apply(schedule("big", 1_000, payload_ref="p1"))
    store = store_from(shard)
    permits = Permits(PermitLimits())
    fetch = FakeObjects({object_key: data})
    plan = planner(store, fetch, permits=permits).round(NOW, 0, OWNER, lanes(store),
                                                        lambda _: True, {}, set())
    assert fetch.calls == [object_key]
    [claim] = plan.claims
    assert claim.template.payload == data and claim.size_bytes == len(data)
    assert permits.bytes_used == len(data)
    admission = r.decode(prepare_admission(claim, "a1", NOW).data)
    assert isinstance(admission, r.PublishAdmission)
    assert admission.prepared_digest == template_digest(claim.template)
    assert not plan.expiries


def test_byte_permits_count_the_real_payload_size(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """Two 3000-byte payloads under a 4000-byte budget: one claim, then out of permits."""
    shard = MemoryShard()
    stubs: dict[str, bytes | Exception] = {}
    for n in range(2):
        data = bytes([n]) * 3_000
        stubs[commit_payload(shard, f"p{n}", data)] = data
        shard.apply(schedule(f"m{n}", 1_000 + n, payload_ref=f"p{n}"))
    store = store_from(shard)
    plan = planner(store, FakeObjects(stubs), permits=Permits(PermitLimits(bytes=4_000))).round(
        NOW, 0, OWNER, lanes(store), lambda _: True, {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["m0"]
    assert plan.waiting["local"] == "out of permits"


@pytest.mark.parametrize(("problem", "words"), [
    (None, "missing"),
    (ObjectCorrupt("object payloads/default/0/p1 does not match its recorded SHA-256"),
     "corrupt"),
    (b"y" * 5_000, "attested"),
])
def test_a_missing_or_corrupt_object_is_a_permanent_pre_send_error(
    store_from: Callable[[MemoryShard], ShardStore], problem: bytes | Exception | None,
    words: str,
) -> None:
    """Missing, corrupt, or not the attested bytes: CLAIM_RESULT PERMANENT_ERROR naming the
    object key, no claim, permits returned; applied, it FAILS the message."""
    shard = MemoryShard()
    activate(shard, OWNER.owner_id, OWNER.fencing_epoch)
    object_key = commit_payload(shard, "p1", b"x" * 5_000)
    shard.apply(schedule("big", 1_000, payload_ref="p1"))
    store = store_from(shard)
    permits = Permits(PermitLimits())
    fetch = FakeObjects({} if problem is None else {object_key: problem})
    plan = planner(store, fetch, permits=permits).round(NOW, 0, OWNER, lanes(store),
                                                        lambda _: True, {}, set())
    assert plan.claims == []
    assert (permits.worker_used, permits.bytes_used) == (0, 0)
    [raw] = plan.expiries
    result = r.decode(raw)
    assert isinstance(result, r.ClaimResult)
    assert result.disposition == r.ClaimDisposition.PERMANENT_ERROR
    assert object_key in result.detail and words in result.detail
    applied = shard.result(raw, broker_ms=NOW.latest_ms)
    assert applied.status == r.ResultStatus.APPLIED, applied.detail
    message = shard.message("big")
    assert message is not None and message.state == MessageState.FAILED
    assert message.detail is not None and object_key in message.detail


def test_an_unreachable_object_store_leaves_the_message_due(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """ServiceUnreachable proves nothing: no claim, no CLAIM_RESULT, one try per round, inline
    work still claimed; the next round with the store back claims it."""
    shard = MemoryShard()
    data = b"z" * 500
    keys_ = [commit_payload(shard, f"p{n}", data) for n in range(2)]
    shard.apply(schedule("big0", 1_000, payload_ref="p0"))
    shard.apply(schedule("big1", 1_001, payload_ref="p1"))
    shard.apply(schedule("inline", 1_002, payload=b"small"))
    store = store_from(shard)
    down = FakeObjects({k: ServiceUnreachable("s3 is down") for k in keys_})
    p = planner(store, down)
    plan = p.round(NOW, 0, OWNER, lanes(store), lambda _: True, {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["inline"]
    assert plan.expiries == [] and len(down.calls) == 1
    assert "unreachable" in plan.waiting["local"]
    assert (p.permits.worker_used, p.permits.bytes_used) == (1, len(b"small"))

    p.fetch_payload = FakeObjects({k: data for k in keys_})
    plan2 = p.round(NOW, 0, OWNER, lanes(store), lambda _: True,
                    {c.delay_message_id: c for c in plan.claims}, set())
    assert sorted(c.delay_message_id for c in plan2.claims) == ["big0", "big1"]


def test_without_an_object_store_large_payloads_wait(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """A planner given no fetch_payload claims nothing with a payload_ref and fails nothing."""
    shard = MemoryShard()
    commit_payload(shard, "p1", b"x" * 100)
    shard.apply(schedule("big", 1_000, payload_ref="p1"))
    store = store_from(shard)
    plan = planner(store, None).round(NOW, 0, OWNER, lanes(store), lambda _: True, {}, set())
    assert plan.claims == [] and plan.expiries == []
    assert "no object store" in plan.waiting["local"]


def test_an_ordered_key_waits_behind_a_payload_the_store_could_not_serve(
    store_from: Callable[[MemoryShard], ShardStore],
) -> None:
    """In an ORDERED lane, later work for a key never overtakes a skipped large payload."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", ordered=True, **op("o")))
    object_key = commit_payload(shard, "p1", b"x" * 100)
    shard.apply(schedule("first", 1_000, key="K", payload_ref="p1"))
    shard.apply(schedule("second", 2_000, key="K", payload=b"inline"))
    shard.apply(schedule("other", 3_000, key="L", payload=b"inline"))
    store = store_from(shard)
    down = FakeObjects({object_key: ServiceUnreachable("down")})
    plan = planner(store, down).round(NOW, 0, OWNER, lanes(store), lambda _: True, {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["other"]
