"""The stages of ``bench/apply.py``'s decomposition, each timed alone over the same records.

Log read, ``apply`` into an Overlay over an empty view (and its parts: the SCHEDULE
handler, value encoding), ``store.write`` of the resulting batches, the store misses a
SCHEDULE does, and a cProfile pass of the runner. ``decompose`` runs all but the misses
(timed on the runner's own store, in ``apply_rounds``) and the profile; ``bench/apply.py``
prints where a record's time goes.
"""

from __future__ import annotations

import cProfile
import gc
import hashlib
import io
import pstats
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from generated_schedules import IDENTITY
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.protocol import LogRecord
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.machine import DEFAULT_LIMITS, apply, commands
from nereus.machine.tx import Tx
from nereus.records import Schedule, codec
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, Message, WorkRef, decode_value, encode_value
from nereus.state.view import EmptyView, Overlay, Writes


def stage_read(log_dir: Path, n: int, batch: int) -> tuple[float, list[list[LogRecord]]]:
    log = FileShardLog(log_dir, create=False)
    got: list[list[LogRecord]] = []
    try:
        started = time.perf_counter()
        position = 0
        while position < n:
            records = log.read(position, batch)
            if not records:
                break
            got.append(records)
            position += len(records)
        seconds = time.perf_counter() - started
    finally:
        log.close()
    return seconds, got


def stage_apply(batches: list[list[LogRecord]]) -> tuple[float, list[Writes], int]:
    """``apply`` exactly as the runner calls it, but over an empty view; no store."""
    out: list[Writes] = []
    apply_level_writes = 0
    started = time.perf_counter()
    for records in batches:
        overlay = Overlay(EmptyView())
        for record in records:
            applied = apply(
                overlay, record.payload, position=record.position, broker_ms=record.broker_ms
            )
            overlay.merge(applied.writes)
            apply_level_writes += len(applied.writes)
        out.append(overlay.finish())
    return time.perf_counter() - started, out, apply_level_writes


def stage_timed(fn: Callable[[bytes], object], batches: list[list[LogRecord]]) -> float:
    started = time.perf_counter()
    for records in batches:
        for record in records:
            fn(record.payload)
    return time.perf_counter() - started


def sha_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stage_write(root: Path, prepared: list[Writes]) -> float:
    store = ShardStore.open(root, identity=IDENTITY, create=True)
    try:
        started = time.perf_counter()
        for writes in prepared:
            store.write(writes)
        return time.perf_counter() - started
    finally:
        store.close()


def stage_handler(batches: list[list[LogRecord]]) -> float:
    """The SCHEDULE handler alone (with its Tx), on pre-decoded records, as apply calls it."""
    decoded: list[list[tuple[LogRecord, Schedule]]] = []
    for records in batches:
        pairs = []
        for record in records:
            command = codec.decode(record.payload)
            assert isinstance(command, Schedule)
            pairs.append((record, command))
        decoded.append(pairs)
    started = time.perf_counter()
    for pairs in decoded:
        overlay = Overlay(EmptyView())
        for record, command in pairs:
            tx = Tx(overlay, position=record.position, broker_ms=record.broker_ms,
                    limits=DEFAULT_LIMITS)
            commands.schedule(tx, command)
            overlay.merge(tx.writes)
    return time.perf_counter() - started


def stage_encode(prepared: list[Writes]) -> float:
    """Encoding the three values the SCHEDULE handler stores: message, timeline entry, lane.

    They are decoded back from the batches' writes. The lane is a batch aggregate (the
    overlay encodes it once per batch, see ``nereus.machine.tx``), so it is encoded once
    per batch here too.
    """
    values: list[object] = []
    for writes in prepared:
        lane: Lane | None = None
        for key, raw in writes.items():
            if raw is None:
                continue
            if key[0] == keys.MSG[0]:
                values.append(decode_value(raw, Message))
            elif key[0] == keys.TIMELINE[0]:
                values.append(decode_value(raw, WorkRef))
            elif key[0] == keys.LANE[0]:
                lane = decode_value(raw, Lane)
        if lane is not None:
            values.append(lane)
    started = time.perf_counter()
    for value in values:
        encode_value(value)
    return time.perf_counter() - started


def stage_misses(store: ShardStore, n: int) -> float:
    """The two point reads that miss per SCHEDULE (result/c/<cmd>, msg/<id>), vs. ``store``."""
    rng = random.Random(12345)
    probes = []
    for _ in range(n):
        probes.append(keys.result_key(f"c/{rng.getrandbits(128):032x}"))
        probes.append(keys.msg_key(f"{rng.getrandbits(128):032x}"))
    get = store.get
    started = time.perf_counter()
    for key in probes:
        get(key)
    return time.perf_counter() - started


@dataclass(frozen=True, slots=True, kw_only=True)
class Decomposition:
    """Seconds of each stage over all the records (b1-b3a are parts of ``apply_s``)."""

    read_s: float  # (a) the log read
    apply_s: float  # (b) apply into an Overlay over an empty view
    decode_s: float  # (b1) codec.decode
    sha_s: float  # (b2) sha256 of the record
    handler_s: float  # (b3) the SCHEDULE handler, with its Tx
    encode_s: float  # (b3a) encoding the values the handler stores
    write_s: float  # (c) store.write of (b)'s batches into a fresh store
    apply_level_writes: int  # keys apply wrote, over all records


def decompose(root: Path, log_dir: Path, n: int, batch: int) -> Decomposition:
    """Stages (a)-(c), each timed alone; (c) writes into a fresh store at ``root/db-write``."""
    read_s, read_batches = stage_read(log_dir, n, batch)
    decode_s = stage_timed(codec.decode, read_batches)
    sha_s = stage_timed(sha_hex, read_batches)
    apply_s, prepared, apply_level_writes = stage_apply(read_batches)
    handler_s = stage_handler(read_batches)
    del read_batches
    encode_s = stage_encode(prepared)
    write_s = stage_write(root / "db-write", prepared)
    del prepared
    gc.collect()
    return Decomposition(read_s=read_s, apply_s=apply_s, decode_s=decode_s, sha_s=sha_s,
                         handler_s=handler_s, encode_s=encode_s, write_s=write_s,
                         apply_level_writes=apply_level_writes)


def profile_runner(root: Path, log_dir: Path, batch: int, top: int) -> str:
    store = ShardStore.open(root, identity=IDENTITY, create=True)
    log = FileShardLog(log_dir, create=False)
    profiler = cProfile.Profile()
    try:
        runner = ShardRunner(store, log, batch_records=batch)
        profiler.enable()
        runner.run_until_caught_up()
        profiler.disable()
    finally:
        log.close()
        store.close()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()
