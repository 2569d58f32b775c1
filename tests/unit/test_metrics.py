"""The metrics' pure parts: the ``[metrics]`` table, the shard loop's counts and
histograms, and the front door's merge of its workers' expositions (each sample once)."""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import msgspec
import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from nereus.adapters.admin.wire import WorkerView
from nereus.config import parse_config
from nereus.engine.metrics.collect import exposition_of, held_back_family, restarts_family
from nereus.engine.metrics.exposition_merge import merge
from nereus.engine.metrics.memory_gauges import resident_bytes, resident_family
from nereus.engine.metrics.shard_counters import Buckets, ShardMetrics
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.errors import ConfigError
from nereus.machine import Applied
from nereus.records import Outcome, PublishAdmission, PublishOutcome, ResultStatus
from nereus.state.values import Result
from tests.fake_clock import FakeClock

BASE = '[routes.default]\nlog = "file"\npartitions = 2\n\n'


def test_metrics_listen_is_off_by_default_and_parsed_when_set() -> None:
    """No ``[metrics]``: no listener; ``listen`` gives host and port, IPv6 unbracketed."""
    assert parse_config(BASE).metrics.address is None
    assert parse_config(BASE + '[metrics]\nlisten = "127.0.0.1:9464"').metrics.address == (
        "127.0.0.1", 9464)
    assert parse_config(BASE + '[metrics]\nlisten = "[::1]:9464"').metrics.address == (
        "::1", 9464)


@pytest.mark.parametrize(("table", "expected"), [
    ('[metrics]\nlisten = "9464"', "[metrics] listen = '9464': expected HOST:PORT"),
    ('[metrics]\nlisten = "127.0.0.1:70000"', "with a port of 1-65535"),
    ("[metrics]\nlisten = 9464", "[metrics] listen = 9464: expected"),
    ('[metrics]\nlisen = "127.0.0.1:9464"', "[metrics] unknown key 'lisen'"),
])
def test_bad_metrics_settings_name_the_line_and_key(table: str, expected: str) -> None:
    """A bad ``[metrics]`` value is a ConfigError at nereus.toml:6 naming the key."""
    with pytest.raises(ConfigError) as caught:
        parse_config(BASE + table)
    assert caught.value.message.startswith("nereus.toml:6: ")
    assert expected in caught.value.message


def test_buckets_are_inclusive_upper_bounds_and_cumulative() -> None:
    """A value on a bound falls in that bucket (Prometheus ``le``); counts accumulate."""
    buckets = Buckets((0.1, 1.0))
    for value in (0.1, 0.5, 1.0, 7.0):
        buckets.observe(value)
    cumulative, total = buckets.cumulative()
    assert cumulative == [("0.1", 1), ("1.0", 3), ("+Inf", 4)]
    assert total == pytest.approx(8.6)


@dataclass
class _Template:
    action_at_ms: int


@dataclass
class _Claim:
    lane: str
    template: _Template


class _Book:
    def __init__(self, claims: dict[str, _Claim]) -> None:
        self.claims = claims

    def for_attempt(self, attempt_id: str) -> _Claim | None:
        return self.claims.get(attempt_id)


def _admission(attempt: str, *, decided_ms: int) -> PublishAdmission:
    return PublishAdmission(
        attempt_id=attempt, delay_message_id=f"m-{attempt}", generation=1, work_digest="w",
        lane="out", claim_id="c", claim_sequence=1, owner_id="o", fencing_epoch=1,
        prepared_digest="p", decided_earliest_ms=decided_ms, decided_latest_ms=decided_ms + 5)


def _applied(record: object, status: ResultStatus, reason: str | None = None, *,
             duplicate: bool = False) -> Applied:
    result = Result(status, "X", 1, "sha", reason)
    return Applied(result, {}, record, duplicate)  # type: ignore[arg-type]


def test_shard_metrics_count_admissions_outcomes_and_time_them() -> None:
    """A won admission records its due lag, its outcome the latency since; a stale one
    counts by reason (FENCED is a fencing event too); a re-delivery counts nothing."""
    now = [100.0]
    metrics = ShardMetrics(lambda: now[0])
    book = _Book({"a1": _Claim("out", _Template(action_at_ms=1_000))})
    metrics.observe(_applied(_admission("a1", decided_ms=1_250), ResultStatus.APPLIED), book)
    metrics.observe(_applied(_admission("a1", decided_ms=1_250), ResultStatus.APPLIED,
                             duplicate=True), book)
    metrics.observe(_applied(_admission("a2", decided_ms=1_000), ResultStatus.STALE, "FENCED"),
                    book)
    now[0] = 100.5
    outcome = PublishOutcome(outcome_id="o1", attempt_id="a1", delay_message_id="m-a1",
                             owner_id="o", fencing_epoch=1, outcome=Outcome.PUBLISHED)
    metrics.observe(_applied(outcome, ResultStatus.APPLIED), book)
    assert metrics.admitted == {"out": 1}
    assert metrics.stale["FENCED"] == 1 and sum(metrics.stale.values()) == 1
    assert metrics.fencing_events == 1
    assert metrics.outcomes == {("out", "PUBLISHED"): 1}
    lag, lag_sum = metrics.due_lag["out"].cumulative()
    assert lag_sum == pytest.approx(0.25) and dict(lag)["0.25"] == 1 and dict(lag)["0.1"] == 0
    latency, latency_sum = metrics.outcome_latency["out"].cumulative()
    assert latency_sum == pytest.approx(0.5) and latency[-1] == ("+Inf", 1)


def test_claims_are_counted_apart_from_admissions_and_revoked_once() -> None:
    """Seed 000 section 5: each claim the book takes counts once with its preparation time,
    and no admission is counted; a claim revoked at hand-over and then released by its
    stale admission counts one revocation (handover), one expired at its deadline another."""
    from nereus.engine.scheduler.admission import prepare_admission
    from nereus.engine.scheduler.claims import ClaimBook, Revocation
    from nereus.engine.scheduler.permits import PermitLimits, Permits
    from tests.unit.test_claim_handover import CLAIM, NOW

    metrics = ShardMetrics(lambda: 0.0)
    permits = Permits(PermitLimits())
    book = ClaimBook(permits, lambda _: None, metrics)
    first = msgspec.structs.replace(CLAIM, prepare_s=0.0002)
    second = msgspec.structs.replace(CLAIM, claim_id="c2", delay_message_id="m2",
                                     prepare_s=0.004)
    for n, claim in enumerate((first, second)):
        assert permits.try_acquire(claim.lane, claim.size_bytes)
        book.by_message[claim.delay_message_id] = claim
        book.admit(prepare_admission(claim, f"a{n}", NOW))
    book.revoked(first, Revocation.HANDOVER)
    book.release(first, Revocation.STALE)
    book.release(second, Revocation.DEADLINE)
    assert metrics.claims == {"local": 2} and metrics.admitted == {}
    assert metrics.revocations == {("local", "handover"): 1, ("local", "deadline"): 1}
    latency, total = metrics.claim_latency["local"].cumulative()
    assert total == pytest.approx(0.0042) and dict(latency)["0.00025"] == 1
    assert permits.worker_used == 0 and len(book) == 0


WORKER_0 = """\
# HELP nereus_admissions_total Winning admissions
# TYPE nereus_admissions_total counter
nereus_admissions_total{lane="out",route="default",shard="default/0"} 3.0
# HELP nereus_lane_ready 1 while READY
# TYPE nereus_lane_ready gauge
nereus_lane_ready{lane="out"} 1.0
# HELP nereus_worker_restarts_total Restarts
# TYPE nereus_worker_restarts_total counter
nereus_worker_restarts_total{kind="shard",worker="shard-default/0"} 2.0
"""
WORKER_1 = WORKER_0.replace("default/0", "default/1").replace(
    "} 3.0", "} 4.0").replace('lane_ready{lane="out"} 1.0', 'lane_ready{lane="out"} 0.0')


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in out, f"{key} appears twice"
            out[key] = sample.value
    return out


def test_the_front_door_merges_disjoint_shards_once_and_names_each_process() -> None:
    """Each worker's shards appear once with their own values (no sum across processes);
    a lane is READY only if every process says so; thread restarts are named after their
    process; the front door's own restarts and missing workers are added."""
    own = [restarts_family([WorkerView(name="process-0", kind="process", state="RUNNING",
                                       restarts=1, last_error=None, last_error_at=None)])]
    text = merge([("worker-0", WORKER_0), ("worker-1", WORKER_1)], own=own, unanswered=1)
    samples = _samples(text)
    admissions = {dict(labels)["shard"]: value for (name, labels), value in samples.items()
                  if name == "nereus_admissions_total"}
    assert admissions == {"default/0": 3.0, "default/1": 4.0}
    assert samples[("nereus_lane_ready", (("lane", "out"),))] == 0.0
    restarts = {dict(labels)["worker"]: value for (name, labels), value in samples.items()
                if name == "nereus_worker_restarts_total"}
    assert restarts == {"process-0": 1.0, "worker-0/shard-default/0": 2.0,
                        "worker-1/shard-default/1": 2.0}
    assert samples[("nereus_worker_scrape_errors", ())] == 1.0


def test_a_shard_reported_by_two_processes_is_taken_from_its_owner_only() -> None:
    """During a move the process letting a shard go may still report it: with the owners
    known, only the owner's samples of that shard are kept (never a sum of both)."""
    moving = WORKER_1.replace("default/1", "default/0")  # worker-1 took default/0: 4.0
    text = merge([("worker-0", WORKER_0), ("worker-1", moving)],
                 owners={"default/0": "worker-1"})
    admissions = [value for (name, _), value in _samples(text).items()
                  if name == "nereus_admissions_total"]
    assert admissions == [4.0]


def test_an_exposition_of_no_families_is_empty_text() -> None:
    """Rendering nothing gives nothing (a front door whose workers all failed still
    answers with its own families only)."""
    assert exposition_of([]) == ""


def test_a_held_back_clock_is_a_gauge_and_the_merge_takes_the_largest() -> None:
    """nereus_trusted_time_held_back_seconds is 0 on a steady clock and the steps' size
    after the wall clock steps forwards; the front door keeps the largest of its workers'
    values, not their sum (a worker started between two steps holds back only the last)."""
    name = "nereus_trusted_time_held_back_seconds"
    clocks = FakeClock(wall_ms=1_000_000)
    older = TrustedClock(max_error_ms=50, source=clocks)
    assert _samples(exposition_of([held_back_family(older)]))[(name, ())] == 0.0
    clocks.step_wall(2_000)
    newer = TrustedClock(max_error_ms=50, source=clocks)
    newer.now()
    clocks.step_wall(4_000)
    six, four = (exposition_of([held_back_family(c)]) for c in (older, newer))
    assert _samples(six)[(name, ())] == 6.0 and _samples(four)[(name, ())] == 4.0
    assert _samples(merge([("worker-0", four), ("worker-1", six)]))[(name, ())] == 6.0


def test_resident_memory_follows_pages_this_process_touches() -> None:
    """nereus_resident_memory_bytes is the process's resident set, not its address space:
    256 MiB mapped but never written hardly moves it; writing 128 MiB of fresh memory
    raises it by at least 96 MiB, and the gauge says what ``resident_bytes`` reads (the
    margins leave room for whatever else the process allocates or frees meanwhile)."""
    before = resident_bytes()
    assert before is not None and before > 0
    untouched = mmap.mmap(-1, 256 << 20)  # anonymous zero pages: resident once written
    mapped = resident_bytes()
    assert mapped is not None and mapped - before < 64 << 20
    touched = b"\x01" * (128 << 20)
    after = resident_bytes()
    assert after is not None and after - before >= 96 << 20
    value = _samples(exposition_of([resident_family()]))[("nereus_resident_memory_bytes", ())]
    assert abs(value - after) < 32 << 20
    del touched
    untouched.close()


def test_the_merge_sums_the_processes_resident_memory_and_budgets() -> None:
    """The front door's resident memory and its workers' are summed into the engine's; so
    are the workers' shares of the memory budget (each holds half of ``memory_mb``)."""
    def worker(rss: int) -> str:
        return ("# TYPE nereus_resident_memory_bytes gauge\n"
                f"nereus_resident_memory_bytes {rss}\n"
                "# TYPE nereus_store_memory_budget_bytes gauge\n"
                f"nereus_store_memory_budget_bytes {128 << 20}\n")
    own = [GaugeMetricFamily("nereus_resident_memory_bytes", "front door", value=50)]
    samples = _samples(merge([("worker-0", worker(100)), ("worker-1", worker(200))], own=own))
    assert samples[("nereus_resident_memory_bytes", ())] == 350.0
    assert samples[("nereus_store_memory_budget_bytes", ())] == float(256 << 20)
