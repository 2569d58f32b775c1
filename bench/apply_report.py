"""The report of ``bench/apply.py``: its figures as one document, and their text form.

The document's fields, in order, are the JSON keys ``--json`` prints (``msgspec``
Structs turn into JSON objects in field order). The round reported in detail is the one
with the median ratio; the targets are judged on it, and ``ratio_met_every_round`` says
whether the worst round met the ratio too.
"""

from __future__ import annotations

import statistics
import sys

import msgspec

from apply_log import BuiltLog
from apply_rounds import Round, RunnerCheck
from apply_stages import Decomposition

TARGET_COMMANDS_PER_S = 30_000
TARGET_RATIO = 0.3


class Machine(msgspec.Struct, frozen=True):
    python: str


class WorkloadFigures(msgspec.Struct, frozen=True):
    record_bytes_mean: float
    prepare_per_s: float


class AppendFigures(msgspec.Struct, frozen=True):
    seconds: float
    records_per_s: float
    mb_per_s: float


class Millis(msgspec.Struct, frozen=True):
    """Milliseconds of a list of durations."""

    mean: float
    p50: float
    max: float


class Ours(msgspec.Struct, frozen=True):
    """The runner pass of the median round."""

    seconds: float
    commands_per_s: float
    batches: int
    keys_committed: int
    keys_per_record_committed: float
    keys_per_record_apply: float
    first_batch_key_bytes_mean: float
    first_batch_value_bytes_mean: float
    first_batch_bytes: int
    commit_ms: Millis
    commit_share: float
    check: RunnerCheck


class Raw(msgspec.Struct, frozen=True):
    """The raw WriteBatches of the median round."""

    seconds: float
    batches: int
    keys_per_batch: int
    keys_per_s: float
    equivalent_commands_per_s: float
    batch_ms: Millis


class RoundFigures(msgspec.Struct, frozen=True):
    ours_commands_per_s: float
    raw_equivalent_commands_per_s: float
    ratio: float


class Stages(msgspec.Struct, frozen=True):
    """Microseconds per record: the run split by what the stages (a)-(d) took alone."""

    in_run_total: float
    in_run_commit: float
    in_run_read_apply: float
    in_run_residual: float
    a_log_read: float
    b_apply_empty_view: float
    b1_of_which_decode: float
    b2_of_which_sha256: float
    b3_of_which_schedule_handler: float
    b3a_of_which_value_encoding: float
    b4_of_which_rest_of_apply: float
    c_store_write: float
    d_store_get_misses_x2: float
    raw_write: float
    raw_of_which_db_write: float


class Targets(msgspec.Struct, frozen=True):
    commands_per_s: int
    ratio: float
    commands_per_s_met: bool
    ratio_met: bool
    ratio_met_every_round: bool


class ApplyReport(msgspec.Struct, frozen=True, omit_defaults=True):
    """Everything ``bench/apply.py`` reports; ``profile`` only with ``--profile``."""

    records: int
    batch_records: int
    append_group: int
    machine: Machine
    workload: WorkloadFigures
    append: AppendFigures
    ours: Ours
    raw: Raw
    ratio: float
    rounds: list[RoundFigures]
    ratio_min: float
    stages_us_per_record: Stages
    targets: Targets
    profile: str | None = None


# --------------------------------------------------------------------------------------
# the figures


def _us(seconds: float, n: int) -> float:
    return seconds / n * 1e6 if n else 0.0


def _ms(values: list[float]) -> Millis:
    if not values:
        return Millis(mean=0.0, p50=0.0, max=0.0)
    return Millis(mean=statistics.fmean(values) * 1e3, p50=statistics.median(values) * 1e3,
                  max=max(values) * 1e3)


def _ours(median: Round, stages: Decomposition) -> Ours:
    n, ran, commits = median.records, median.ours, median.ours.commits
    committed_keys = sum(commits.keys_per_batch)
    key_bytes = [len(k) for k, _ in commits.first_batch]
    value_bytes = [0 if v is None else len(v) for _, v in commits.first_batch]
    return Ours(
        seconds=ran.seconds,
        commands_per_s=n / ran.seconds,
        batches=len(commits.keys_per_batch),
        keys_committed=committed_keys,
        keys_per_record_committed=committed_keys / n,
        keys_per_record_apply=stages.apply_level_writes / n,
        first_batch_key_bytes_mean=statistics.fmean(key_bytes),
        first_batch_value_bytes_mean=statistics.fmean(value_bytes),
        first_batch_bytes=sum(key_bytes) + sum(value_bytes),
        commit_ms=_ms(commits.seconds),
        commit_share=sum(commits.seconds) / ran.seconds,
        check=ran.check,
    )


def _raw(median: Round) -> Raw:
    batches_run = len(median.ours.commits.keys_per_batch)
    keys_per_batch = len(median.ours.commits.first_batch)
    return Raw(
        seconds=median.raw_seconds,
        batches=batches_run,
        keys_per_batch=keys_per_batch,
        keys_per_s=keys_per_batch * batches_run / median.raw_seconds,
        equivalent_commands_per_s=median.raw_equivalent,
        batch_ms=_ms(median.raw_per_batch),
    )


def _stages(median: Round, st: Decomposition) -> Stages:
    n, run_s, miss_s = median.records, median.ours.seconds, median.ours.miss_seconds
    commit_s = sum(median.ours.commits.seconds)
    return Stages(
        in_run_total=_us(run_s, n),
        in_run_commit=_us(commit_s, n),
        in_run_read_apply=_us(run_s - commit_s, n),
        in_run_residual=_us(run_s - commit_s - st.read_s - st.apply_s - miss_s, n),
        a_log_read=_us(st.read_s, n),
        b_apply_empty_view=_us(st.apply_s, n),
        b1_of_which_decode=_us(st.decode_s, n),
        b2_of_which_sha256=_us(st.sha_s, n),
        b3_of_which_schedule_handler=_us(st.handler_s, n),
        b3a_of_which_value_encoding=_us(st.encode_s, n),
        b4_of_which_rest_of_apply=_us(st.apply_s - st.decode_s - st.sha_s - st.handler_s, n),
        c_store_write=_us(st.write_s, n),
        d_store_get_misses_x2=_us(miss_s, n),
        raw_write=_us(median.raw_seconds, n),
        raw_of_which_db_write=_us(median.raw_write_only, n),
    )


def assemble(*, batch: int, append_group: int, log: BuiltLog, rounds: list[Round],
             stages: Decomposition) -> ApplyReport:
    """The report: every round's pair, the median round in detail, the targets."""
    by_ratio = sorted(rounds, key=lambda r: r.ratio)
    median = by_ratio[len(by_ratio) // 2]
    n = median.records
    return ApplyReport(
        records=n,
        batch_records=batch,
        append_group=append_group,
        machine=Machine(python=sys.version.split()[0]),
        workload=WorkloadFigures(record_bytes_mean=log.record_bytes / n,
                                 prepare_per_s=n / log.prepare_s),
        append=AppendFigures(seconds=log.append_s, records_per_s=n / log.append_s,
                             mb_per_s=log.record_bytes / log.append_s / 1e6),
        ours=_ours(median, stages),
        raw=_raw(median),
        ratio=median.ratio,
        rounds=[RoundFigures(ours_commands_per_s=r.ours_rate,
                             raw_equivalent_commands_per_s=r.raw_equivalent, ratio=r.ratio)
                for r in rounds],
        ratio_min=by_ratio[0].ratio,
        stages_us_per_record=_stages(median, stages),
        targets=Targets(
            commands_per_s=TARGET_COMMANDS_PER_S,
            ratio=TARGET_RATIO,
            commands_per_s_met=n / median.ours.seconds >= TARGET_COMMANDS_PER_S,
            ratio_met=median.ratio >= TARGET_RATIO,
            ratio_met_every_round=by_ratio[0].ratio >= TARGET_RATIO,
        ),
    )


# --------------------------------------------------------------------------------------
# the text


def _mark(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _print_rates(r: ApplyReport) -> None:
    ours, raw, tg = r.ours, r.raw, r.targets
    print(f"Nereus apply bench: {r.records:,} SCHEDULE records, batch {r.batch_records:,}, "
          f"~{r.workload.record_bytes_mean:.0f} B/record, Python {r.machine.python}")
    print(f"  prepare          {r.workload.prepare_per_s:>12,.0f} commands/s")
    print(f"  log append       {r.append.records_per_s:>12,.0f} records/s "
          f"({r.append.mb_per_s:.1f} MB/s, groups of {r.append_group:,}, fdatasync each)")
    print()
    print(f"  ours (runner)    {ours.commands_per_s:>12,.0f} commands/s/shard   "
          f"[target {tg.commands_per_s:,}: {_mark(tg.commands_per_s_met)}]")
    print(f"                   {ours.keys_per_record_committed:.3f} keys/record committed "
          f"({ours.keys_per_record_apply:.1f} written per record by apply; lane and "
          "counters once per batch), "
          f"key {ours.first_batch_key_bytes_mean:.0f} B, "
          f"value {ours.first_batch_value_bytes_mean:.0f} B")
    cm = ours.commit_ms
    print(f"                   {ours.batches} synced batches, commit {cm.mean:.1f} ms mean / "
          f"{cm.p50:.1f} p50 / {cm.max:.1f} max = {ours.commit_share:.0%} of run time")
    bm = raw.batch_ms
    print(f"  raw rocksdict    {raw.equivalent_commands_per_s:>12,.0f} equivalent commands/s "
          f"({raw.keys_per_s:,.0f} keys/s; {raw.keys_per_batch:,} keys/batch, "
          f"{bm.mean:.1f} ms mean / {bm.max:.1f} max)")
    print(f"  ratio ours/raw   {r.ratio:>12.3f}   "
          f"[target {tg.ratio}: {_mark(tg.ratio_met)}]   (the median of "
          f"{len(r.rounds)} rounds; figures above and below are that round's)")
    for number, one in enumerate(r.rounds, 1):
        print(f"    round {number}: ours {one.ours_commands_per_s:>8,.0f}, raw "
              f"{one.raw_equivalent_commands_per_s:>9,.0f} equivalent commands/s, "
              f"ratio {one.ratio:.3f}")
    print()
    budget = r.stages_us_per_record.in_run_total * r.ratio / tg.ratio
    print(f"  targets          >= {tg.commands_per_s:,} commands/s: "
          f"{_mark(tg.commands_per_s_met)}; >= {tg.ratio} of raw: {_mark(tg.ratio_met)}, "
          f"in every round: {_mark(tg.ratio_met_every_round)} "
          f"(at this raw rate the ratio allows {budget:.1f} µs/record in the run)")


def _print_stages(st: Stages) -> None:
    print("  where the time goes (µs/record; (a)-(d) each timed alone over the same records):")
    rows = [
        ("runner, whole run", st.in_run_total),
        ("  commit: store.write in the run (RocksDB)", st.in_run_commit),
        ("  the rest: read + apply + store reads", st.in_run_read_apply),
        ("    (a) log read (FileShardLog.read)", st.a_log_read),
        ("    (b) apply into Overlay(EmptyView)", st.b_apply_empty_view),
        ("        codec.decode (+ canonical re-encode)", st.b1_of_which_decode),
        ("        sha256 of the record", st.b2_of_which_sha256),
        ("        SCHEDULE handler, with its Tx", st.b3_of_which_schedule_handler),
        ("          of which encoding msg+timeline+lane", st.b3a_of_which_value_encoding),
        ("        rest: dedup lookup, Result, counters", st.b4_of_which_rest_of_apply),
        ("    (d) 2 store.get misses, runner's store", st.d_store_get_misses_x2),
        ("    residual: runner loop, merge, caches", st.in_run_residual),
        ("(c) store.write of (b)'s batches, fresh DB", st.c_store_write),
        ("raw WriteBatch (same keys and sizes)", st.raw_write),
        ("    of which db.write (rest: Python puts)", st.raw_of_which_db_write),
    ]
    for label, value in rows:
        print(f"    {label:<44} {value:>8.2f}")
    print("  (the SCHEDULE handler validates the command, builds the Message, writes its timeline")
    print("  entry and work digest, and moves the lane's per-state counts; the rest of apply is")
    print("  the dedup lookup, the Result, the applied-position and records counters)")


def print_report(r: ApplyReport) -> None:
    _print_rates(r)
    print()
    _print_stages(r.stages_us_per_record)
    if r.profile is not None:
        print()
        print(r.profile)
