"""Settling UNKNOWN attempts: one bounded pass, and what kill -9 leaves UNCERTAIN per lane kind.

Usage::

    .venv/bin/python bench/evidence.py [--attempts 10000] [--history 0 100000 1000000]
                                       [--kill 20000] [--kinds file kafka pulsar] [--json]

**scan** (in process, a file lane): a shard database holding ``--attempts`` UNKNOWN
attempts admitted within the last minutes, half of whose records are in the outbox, after
``--history`` older lines. One ``EvidenceRecovery.scan_once`` (the engine's evidence scan,
all attempts in one destination search from where they were admitted) and one
``FileDestination.fence`` (recovery's proof over the same attempts: found or proven
absent) are timed, with the bytes of outbox they read; beside them, in the same run, the
baselines a pass without a window would cost: the whole outbox read (``since`` 0) and one
search per attempt (timed on a sample, scaled). Flat over time: the pass costs the same
whatever the history before the window.

**kill** (a child engine per row, ``tests/integration/outbox_crash_worker.py load``):
``--kill`` messages due at once on one lane; SIGKILL once a third are published; a new
engine recovers the home and runs the evidence scan to the end. Per lane kind, the
UNCERTAIN attempts left: *before* (no fencing: the file lane's engine given a destination
without its fence; Kafka and Pulsar ``fencing = false``) and *after* (the file lane as
built; Kafka and Pulsar ``fencing = true``; the Pulsar topic deduplicated either way).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from nereus.evidence_mac import ExpectedMac
from scratch import scratch_dir

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "integration" / "outbox_crash_worker.py"
SHARD = "default/0"
WINDOW_MS = 600_000  # the attempts were admitted over the last ten minutes


class ScanFigures(msgspec.Struct, frozen=True):
    history_lines: int
    attempts: int
    scan_s: float  # one scan_once over every UNKNOWN attempt
    scan_settled: int
    scan_read_mb: float
    fence_s: float  # one fence classifying every attempt
    fence_absent: int
    whole_file_s: float  # baseline: the same search from the outbox's first byte
    whole_file_read_mb: float
    per_attempt_s: float  # baseline: one search per attempt (sampled, scaled)


class KillFigures(msgspec.Struct, frozen=True):
    kind: str
    variant: str  # before | after
    messages: int
    published_at_kill: int
    in_flight_at_kill: int  # PUBLISHING when the engine died
    uncertain_after_recovery: int
    uncertain_after_scan: int


# scan -------------------------------------------------------------------------------------
def _write_outbox(path: Path, history: int, attempts: int, now: int) -> dict[str, str]:
    """``history`` old lines, then every other attempt's line over the window; returns each
    attempt's MAC."""
    from nereus.adapters.backends.destination.file_outbox import render_line
    from nereus.adapters.backends.destination.protocol import PublishRequest
    from nereus.publish import PublishTemplate
    from nereus.timespec import format_time_ms

    def line(n: int, attempt: str, at: int) -> bytes:
        template = PublishTemplate(delay_message_id=f"m-{attempt}", generation=1, lane="local",
                                   deliver_at_ms=at, action_at_ms=at, key=None, headers={},
                                   payload=b"x" * 100)
        return render_line(PublishRequest(attempt, template, f"mac-{attempt}"),
                           format_time_ms(at))

    start = now - WINDOW_MS
    with open(path, "wb") as out:
        for n in range(history):  # a day before, 1 ms apart
            out.write(line(n, f"old-{n}", start - 86_400_000 + n))
        for n in range(0, attempts, 2):
            out.write(line(n, f"a{n}", start + n * WINDOW_MS // attempts))
    return {f"a{n}": f"mac-a{n}" for n in range(attempts)}


def _unknown_store(path: Path, macs: Mapping[str, str], now: int) -> Any:
    """A shard database with an UNKNOWN attempt (and its obligation) for each of ``macs``."""
    from nereus.records import AttemptState
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Attempt, Identity, Obligation, encode_value

    store = ShardStore.open(path, identity=Identity(route="default", partition=0,
                                                    schema_version=keys.SCHEMA_VERSION),
                            create=True)
    writes: dict[bytes, bytes | None] = {}
    for n, attempt_id in enumerate(macs):
        admitted = now - WINDOW_MS + n * WINDOW_MS // len(macs)
        writes[keys.attempt_key(attempt_id)] = encode_value(Attempt(
            attempt_id=attempt_id, delay_message_id=f"m-{attempt_id}", generation=1,
            attempt_no=1, lane="local", state=AttemptState.UNKNOWN, claim_id="c",
            owner_id="dead", fencing_epoch=1, prepared_digest="x", admitted_position=n,
            admitted_broker_ms=admitted))
        writes[keys.obligation_key(f"m-{attempt_id}", attempt_id)] = encode_value(Obligation(
            attempt_id=attempt_id, lane="local", key=None, state=AttemptState.UNKNOWN,
            since_position=n))
    store.write(writes, sync=False)
    return store


class _Shard:
    """What the evidence scan needs of a shard (``EvidenceShard``)."""

    def __init__(self, store: Any, macs: Mapping[str, str]) -> None:
        from nereus.engine.shard.loop_status import ShardState
        from nereus.shard import ShardId

        self.shard, self.store, self.state = ShardId("default", 0), store, ShardState.ACTIVE
        self.macs, self.replies = macs, 0

    def evidence_mac(self, delay_message_id: str, generation: int, attempt_id: str) -> str:
        return self.macs[attempt_id]

    def reply(self, result: Any, /) -> None:
        self.replies += 1


class _Counting:
    """A file destination whose reads are counted (bytes of outbox read by its scans)."""

    def __init__(self, path: Path) -> None:
        from nereus.adapters.backends.destination.file_outbox import FileDestination

        self.inner, self.name, self.max_record_bytes = FileDestination("local", path), "local", None
        self.read = 0

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        before = _read_bytes()
        found = self.inner.scan_evidence(wanted, since_ms, until_ms)
        self.read += _read_bytes() - before
        return found


def _read_bytes() -> int:
    """Bytes this process has read (``/proc/self/io`` rchar)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def _timed(fn: Callable[[], Any]) -> tuple[float, Any, int]:
    before, start = _read_bytes(), time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value, _read_bytes() - before


def scan_row(root: Path, history: int, attempts: int) -> ScanFigures:
    from nereus.adapters.backends.destination.file_outbox import (
        FileDestination,
        scan_file_evidence,
    )
    from nereus.engine.process.evidence_scan import EvidenceRecovery

    now = time.time_ns() // 1_000_000
    outbox = root / f"outbox-{history}.jsonl"
    macs = _write_outbox(outbox, history, attempts, now)
    store = _unknown_store(root / f"db-{history}", macs, now)
    shard = _Shard(store, macs)
    counting = _Counting(outbox)
    recovery = EvidenceRecovery({shard.shard: shard}, {"local": counting})  # type: ignore[dict-item]
    scan_s, settled, _ = _timed(recovery.scan_once)
    fence = FileDestination("local", outbox)
    fence._writers.take(SHARD)  # an earlier owner took the lock (its record is the outbox now)
    fence.release_all()
    fence = FileDestination("local", outbox)
    fence_s, fenced, _ = _timed(lambda: fence.fence(SHARD, macs, now - WINDOW_MS - 60_000))
    fence.close()
    whole_s, _, whole_read = _timed(lambda: scan_file_evidence(outbox, macs, None))
    sample = list(macs.items())[:: max(1, attempts // 100)]
    one_s, _, _ = _timed(lambda: [scan_file_evidence(outbox, {a: m}, now - WINDOW_MS - 60_000)
                                  for a, m in sample])
    store.close()
    return ScanFigures(history_lines=history, attempts=attempts, scan_s=round(scan_s, 3),
                       scan_settled=settled, scan_read_mb=round(counting.read / 2**20, 1),
                       fence_s=round(fence_s, 3),
                       fence_absent=attempts - len(fenced.found),
                       whole_file_s=round(whole_s, 3),
                       whole_file_read_mb=round(whole_read / 2**20, 1),
                       per_attempt_s=round(one_s * attempts / len(sample), 1))


# kill -9 under load -----------------------------------------------------------------------
def _lane(kind: str, fencing: bool, topic: str) -> str:
    if kind == "file":
        return '[lanes.local]\ndestination = "file"\npath = "outbox/local.jsonl"\n'
    flag = f"fencing = {'true' if fencing else 'false'}\n"
    if kind == "kafka":
        return (f'[lanes.local]\ndestination = "kafka"\ntopic = "{topic}"\n'
                f'bootstrap = "127.0.0.1:9092"\n{flag}')
    return (f'[lanes.local]\ndestination = "pulsar"\ntopic = "{topic}"\nservice_url = '
            f'"pulsar://127.0.0.1:6650"\nadmin_url = "http://127.0.0.1:8080"\n{flag}')


def _pulsar_topic() -> str:
    from nereus.adapters.backends.pulsar.pulsar_client import admin_request, admin_topic_path

    topic = f"nereus-kill-{uuid.uuid4().hex[:10]}"
    path = f"admin/v2/{admin_topic_path(topic)}"
    admin_request("http://127.0.0.1:8080", "PUT", path, timeout_s=30)
    admin_request("http://127.0.0.1:8080", "POST", f"{path}/deduplicationEnabled", True,
                  timeout_s=30)
    return topic


class _Unfenced:
    """A file destination without its fence: how recovery saw a file lane before."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.max_record_bytes = inner, inner.name, None

    def publish(self, requests: Sequence[Any], now_ms: Callable[[], int]) -> list[Any]:
        return list(self.inner.publish(requests, now_ms))

    def probe(self) -> str | None:
        return self.inner.probe()  # type: ignore[no-any-return]

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        return self.inner.scan_evidence(wanted, since_ms, until_ms)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.inner.close()


def kill_row(root: Path, kind: str, variant: str, messages: int) -> KillFigures:
    from nereus.adapters.backends.destination.file_outbox import FileDestination
    from nereus.config import parse_config
    from nereus.engine.process.home_engine import Engine
    from nereus.views import open_attempts

    home = root / f"{kind}-{variant}"
    topic = _pulsar_topic() if kind == "pulsar" else f"nereus-kill-{uuid.uuid4().hex[:10]}"
    lane = _lane(kind, variant == "after", topic)
    child = subprocess.Popen([sys.executable, str(WORKER), str(home), str(messages), lane,
                              "load"], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert child.stdout is not None
        words = child.stdout.readline().decode().split()
        child.send_signal(signal.SIGKILL)
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
    assert words[:1] == ["ready"], words
    in_flight = _publishing(home)
    config = parse_config((home / "nereus.toml").read_text(), source="nereus.toml")
    injected = {"local": _Unfenced(FileDestination("local", home / "outbox" / "local.jsonl"))} \
        if kind == "file" and variant == "before" else None
    engine = Engine(home, config, destinations=injected)  # type: ignore[arg-type]
    engine.start()
    try:
        (loop,) = engine.shards.values()

        def unknown() -> int:
            return sum(1 for _ in open_attempts(loop.store, state="UNKNOWN"))

        after_recovery = unknown()
        assert engine.evidence is not None
        for _ in range(50):  # passes of an hour at most, until none is behind
            engine.evidence.scan_once()
            if not engine.evidence.behind:
                break
        deadline = time.monotonic() + 30  # what it found applied (PUBLISHED via the log)
        while unknown() > after_recovery - engine.evidence.settled and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        after_scan = unknown()
    finally:
        engine.stop()
    return KillFigures(kind=kind, variant=variant, messages=messages,
                       published_at_kill=int(words[1]), in_flight_at_kill=in_flight,
                       uncertain_after_recovery=after_recovery,
                       uncertain_after_scan=after_scan)


def _publishing(home: Path) -> int:
    """Attempts PUBLISHING in the dead engine's database (as far as it had applied)."""
    from nereus.records import AttemptState
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Obligation, decode_value

    with ShardStore.open(home / "state" / "default" / "0", read_only=True) as store:
        return sum(1 for _, raw in store.scan_prefix(keys.OBLIGATION)
                   if decode_value(raw, Obligation).state == AttemptState.PUBLISHING)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attempts", type=int, default=10_000)
    parser.add_argument("--history", type=int, nargs="+", default=[0, 100_000, 1_000_000])
    parser.add_argument("--kill", type=int, default=20_000)
    parser.add_argument("--kinds", nargs="+", default=["file", "kafka", "pulsar"])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    scans: list[ScanFigures] = []
    kills: list[KillFigures] = []
    with scratch_dir("nereus-evidence-", None, keep=args.keep) as root:
        for history in args.history:
            scans.append(scan_row(root, history, args.attempts))
            print(json.dumps(msgspec.to_builtins(scans[-1])), file=sys.stderr)
        for kind in args.kinds if args.kill else []:  # --kill 0: the scan rows only
            for variant in ("before", "after"):
                kills.append(kill_row(root, kind, variant, args.kill))
                print(json.dumps(msgspec.to_builtins(kills[-1])), file=sys.stderr)
    if args.json:
        print(json.dumps({"scan": msgspec.to_builtins(scans),
                          "kill": msgspec.to_builtins(kills)}))
    else:
        _print(scans, kills)
    return 0


def _print(scans: list[ScanFigures], kills: list[KillFigures]) -> None:
    print("| history lines | UNKNOWN | scan pass | settled | read | fence | proven absent | "
          "baseline: whole outbox | read | baseline: per attempt |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in scans:
        print(f"| {s.history_lines:,} | {s.attempts:,} | {s.scan_s:.2f} s | {s.scan_settled:,} "
              f"| {s.scan_read_mb} MB | {s.fence_s:.2f} s | {s.fence_absent:,} | "
              f"{s.whole_file_s:.2f} s | {s.whole_file_read_mb} MB | {s.per_attempt_s:.0f} s |")
    print()
    print("| lane | fencing | due at once | published at kill | PUBLISHING at kill | "
          "UNCERTAIN after recovery | after the evidence scan |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for k in kills:
        print(f"| {k.kind} | {'off' if k.variant == 'before' else 'on'} | {k.messages:,} | "
              f"{k.published_at_kill:,} | {k.in_flight_at_kill:,} | "
              f"{k.uncertain_after_recovery:,} | "
              f"{k.uncertain_after_scan:,} |")


if __name__ == "__main__":
    sys.exit(main())
