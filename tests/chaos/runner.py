"""One chaos run: workload + nemesis schedule + quiescence + final state + check.

``run_chaos(spec, root, brokers)``:

1. makes a home for the backend under ``root`` (on a small tmpfs when ``full-disk`` is
   among the nemeses) and starts its engine;
2. starts a consumer on every lane, then runs the seeded workload and the nemesis schedule
   side by side for ``duration_s``, every operation and fault going into
   ``root/history.jsonl``;
3. heals everything, reopens what operators closed, and waits for quiescence: every shard
   caught up with nothing claimed or in flight, no message PUBLISHING, no SCHEDULED message
   due unless an UNCERTAIN head of its ORDERED key holds it, and the consumers quiet;
4. stops the engine, reads every Shard Log, every shard's final state and the digests
   (live, replay from empty, replay from every checkpoint, and a replay from empty in a
   home with other ``[shard]`` limits) into the history;
5. checks the history (``checker.check``) and reports.

The report's figures: operations, faults injected, violations, lateness p99 (first read
minus max(deliverAt, the schedule's invoke time), every lane).
"""

from __future__ import annotations

import contextlib
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import msgspec

from nereus.adapters.home.feature_level import write_home_level
from nereus.cluster.records import FeatureLevel
from tests.chaos.checker import Facts, Violation, check
from tests.chaos.client import Executor, Recorder
from tests.chaos.collect import digests, final_state, log_entries, other_config_home
from tests.chaos.consumers import Consumers
from tests.chaos.control import Control, write_control
from tests.chaos.engine_process import EngineFailed, EngineProcess, alive, process_state
from tests.chaos.history import (
    Entry,
    HistoryWriter,
    Op,
    RunEnded,
    RunStarted,
    Seen,
    read_history,
)
from tests.chaos.homes import FAULTED, HEALTHY, ORDERED, Backend, Brokers, make_home
from tests.chaos.nemesis import (
    CheckpointRestore,
    ClockStep,
    Composed,
    DestinationFault,
    FilePathFault,
    FullDisk,
    Nemesis,
    NemesisContext,
    Restart,
    Schedule,
    ServiceOutage,
    SigKill,
    SigStop,
    WorkerSignal,
)
from tests.chaos.workload import Planned, WorkloadSpec, plan

NEMESES = ("sigkill", "restart", "sigstop", "worker-kill", "worker-stop", "refuse", "slow", "hang",
           "fail-after-write", "dir-fault", "fifo-fault", "clock-step", "checkpoint-restore",
           "kafka-outage", "pulsar-outage", "s3-outage", "full-disk", "shard-move",
           "coordinator-outage", "none")
CLUSTER_ONLY = frozenset({"shard-move", "coordinator-outage"})
RunBackend = Literal["file", "kafka", "pulsar", "cluster"]
WORKER_NEMESES = frozenset({"worker-kill", "worker-stop"})
CHILD_NEMESES = frozenset({"refuse", "slow", "hang", "fail-after-write", "clock-step"})
TMPFS_MB = 160


class RunSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A run: the workload's seed, size and length, the backend and the nemeses."""

    seed: int = 1
    ops: int = 60
    duration_s: float = 8.0
    backend: RunBackend = "file"
    nemeses: tuple[str, ...] = ("sigkill",)
    quiesce_s: float = 60.0
    lateness_bound_ms: int = 10_000
    pause_s: tuple[float, float] = (0.5, 2.0)
    hold_s: tuple[float, float] = (1.0, 3.0)
    operator: bool = True
    replay: bool = True
    expiring: float = 0.15
    # "own": each operator mutation passes an idempotency key of its own; "cli": the CLI's
    # default, derived from the content (a second close after an open is then answered
    # with the first one's result: tests/chaos/test_found_by_chaos.py)
    operator_keys: str = "own"
    coordinator: str = "etcd"  # the cluster backend's: etcd or oxia
    # the home's feature level (``nereus.features``): at 2 the owner's admissions and
    # outcomes go into the log as PUBLISH_BATCH records, which the history reads member
    # by member
    feature_level: int = 1

    @property
    def workers(self) -> int:
        names = {part for name in self.nemeses for part in name.split("+")}
        return 2 if WORKER_NEMESES & names else 1


class RunReport(msgspec.Struct, frozen=True, kw_only=True):
    seed: int
    backend: str
    nemeses: list[str]
    history: str
    operations: int
    faults: int
    seen: int
    quiesced: bool
    lateness_p99_ms: int | None
    violations: list[Violation]
    notes: list[str] = msgspec.field(default_factory=list)

    def summary(self) -> str:
        head = (f"seed {self.seed} {self.backend} {' '.join(self.nemeses)}: "
                f"{self.operations} ops, {self.faults} faults, {self.seen} records seen, "
                f"lateness p99 {self.lateness_p99_ms} ms, quiesced {self.quiesced}, "
                f"{len(self.violations)} violation(s); history {self.history}")
        notes = "".join(f"\n  note: {n}" for n in self.notes)
        return head + notes + "".join(f"\n{v.render()}" for v in self.violations[:20])


def build_nemeses(names: tuple[str, ...]) -> list[Nemesis]:
    """The nemeses ``names`` say; ``a+b`` is one nemesis: ``a`` and ``b`` at once
    (``Composed``: started in order, healed in reverse)."""
    out: list[Nemesis] = []
    for name in names:
        if "+" in name:
            out.append(Composed(build_nemeses(tuple(name.split("+")))))
            continue
        if name == "sigkill":
            out.append(SigKill())
        elif name == "restart":
            out.append(Restart())
        elif name == "sigstop":
            out.append(SigStop())
        elif name in WORKER_NEMESES:
            out.append(WorkerSignal(kill=name == "worker-kill"))
        elif name in ("refuse", "slow", "hang", "fail-after-write"):
            out.append(DestinationFault(name.replace("-", "_"), FAULTED + ORDERED,  # type: ignore[arg-type]
                                        name=name))
        elif name == "dir-fault":
            out.append(FilePathFault("directory", "p2"))
        elif name == "fifo-fault":
            out.append(FilePathFault("fifo", "p2"))
        elif name == "clock-step":
            out.append(ClockStep())
        elif name == "checkpoint-restore":
            out.append(CheckpointRestore())
        elif name in ("kafka-outage", "pulsar-outage", "s3-outage"):
            out.append(ServiceOutage(name.split("-")[0]))
        elif name == "full-disk":
            out.append(FullDisk())
        elif name != "none":
            raise ValueError(f"no nemesis {name!r} (known: {', '.join(NEMESES)})")
    return out


def run_chaos(spec: RunSpec, root: Path, brokers: Brokers) -> RunReport:
    """One run under ``root`` (kept: its history is ``root/history.jsonl``); the cluster
    backend is ``cluster_runner.run_cluster_chaos``'s."""
    if spec.backend == "cluster":
        from tests.chaos.cluster_runner import run_cluster_chaos

        return run_cluster_chaos(spec, root, brokers)
    backend: Backend = spec.backend
    root.mkdir(parents=True, exist_ok=True)
    history = root / "history.jsonl"
    history.unlink(missing_ok=True)
    notes: list[str] = []
    with _home_filesystem(root, any("full-disk" in name for name in spec.nemeses)):
        chaos = make_home(root, backend, brokers)
        if spec.feature_level > 1:  # as `nereus upgrade finalize` leaves it
            write_home_level(chaos.home, FeatureLevel(level=spec.feature_level,
                                                      raised_by="chaos", reason="run"))
        control = root / "control.json"
        write_control(control, Control())
        nemeses = build_nemeses(spec.nemeses)
        faulted = {lane for n in nemeses for lane in n.lanes()}
        lanes = [msgspec.structs.replace(lane, healthy=lane.name in HEALTHY
                                         and lane.name not in faulted)
                 for lane in chaos.lanes]
        writer = HistoryWriter(history)
        recorder = Recorder(writer)
        engine = EngineProcess(chaos.home, control,
                               launcher="cli" if spec.workers > 1 else "child",
                               workers=spec.workers, on_start=recorder.write)
        rng = random.Random(spec.seed)
        ctx = NemesisContext(engine=engine, control=control, home=chaos.home,
                             lanes={lane.name: lane.destination for lane in lanes},
                             rng=rng, shards=chaos.shards)
        quiesced = False
        try:
            recorder.write(RunStarted(
                seed=spec.seed, backend=spec.backend, nemeses=list(spec.nemeses),
                ops=spec.ops, duration_s=spec.duration_s, lanes=lanes, shards=chaos.shards,
                clock_bound_ms=_clock_bound(spec), lateness_bound_ms=spec.lateness_bound_ms,
                started_ms=_now_ms(), inline_limit=1_024, home=str(chaos.home)))
            engine.start()
            with Consumers(recorder, chaos.consumers) as consumers:
                workload = WorkloadSpec(
                    seed=spec.seed, ops=spec.ops, duration_s=spec.duration_s,
                    lanes=FAULTED + HEALTHY, ordered_lanes=ORDERED,
                    shards=tuple(chaos.shards), operator=spec.operator,
                    expiring=spec.expiring,
                    gated_lanes=tuple(lane for lane in FAULTED if lane not in faulted))
                executor = Executor(chaos.home, plan(workload), recorder, _now_ms() + 300,
                                    root / "scratch", evidence_of=consumers.evidence,
                                    operator_keys=spec.operator_keys)
                schedule = Schedule(nemeses, ctx, recorder, duration_s=spec.duration_s,
                                    pause_s=spec.pause_s, hold_s=spec.hold_s)
                _side_by_side(executor, schedule, spec)
                notes += [f"nemesis error: {e}" for e in schedule.errors]
                _recover(engine, notes)
                _reopen(executor)
                quiesced = _quiesce(lambda: _busy(engine), consumers, spec.quiesce_s, notes)
                engine.stop()
                _settle(consumers)
                notes += [f"consumer: {e}" for e in consumers.errors[:3]]
            other = other_config_home(chaos.home, root / "replay-home") if spec.replay else None
            for shard in chaos.shards:
                recorder_write_all(recorder, log_entries(chaos.home, shard))
                recorder_write_all(recorder, final_state(chaos.home, shard))
                if spec.replay:
                    recorder_write_all(recorder, digests(chaos.home, shard, other))
            recorder.write(RunEnded(ended_ms=_now_ms(), quiesced=quiesced,
                                    faults=recorder.faults, notes=notes))
        finally:
            engine.close()
            writer.close()
    lines = read_history(history)
    violations = check(lines)
    return RunReport(seed=spec.seed, backend=spec.backend, nemeses=list(spec.nemeses),
                     history=str(history), operations=recorder.ops, faults=recorder.faults,
                     seen=sum(1 for line in lines if isinstance(line.entry, Seen)),
                     quiesced=quiesced, lateness_p99_ms=lateness_p99(Facts.of(lines)),
                     violations=violations, notes=notes)


def recorder_write_all(recorder: Recorder, entries: Iterable[Entry]) -> None:
    for entry in entries:
        recorder.write(entry)


def _clock_bound(spec: RunSpec) -> int:
    """How early a consumer may see a message: 0, unless the engine's clock is stepped
    and the engine restarted under the step on a Shard Log whose record times are the
    engine's own (file, Pulsar: docs/rules.md §6 says a skew there is not detectable); on
    Kafka (a cluster's Command Topic too) the bound is ``max_clock_ahead_ms`` (1 s)."""
    names = {part for name in spec.nemeses for part in name.split("+")}
    if "clock-step" not in names or not {"sigkill", "restart", "checkpoint-restore"} & names:
        return 0
    return 1_000 if spec.backend in ("kafka", "cluster") else max(ClockStep().steps_ms)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@contextlib.contextmanager
def _home_filesystem(root: Path, tmpfs: bool) -> Iterator[None]:
    """``root/home`` on a tmpfs of its own (unmounted afterwards) when asked."""
    if not tmpfs:
        yield
        return
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m,mode=0700", "tmpfs",
                    str(home)], check=True, capture_output=True, timeout=30)
    try:
        yield
    finally:
        for _ in range(20):
            done = subprocess.run(["umount", str(home)], capture_output=True, timeout=30,
                                  check=False)
            if done.returncode == 0:
                break
            time.sleep(0.5)


def _side_by_side(executor: Executor, schedule: Schedule, spec: RunSpec) -> None:
    """The workload and the nemeses in two threads owned here; both done on return."""
    workers = [threading.Thread(target=executor.run, name="chaos-client", daemon=True),
               threading.Thread(target=schedule.run, name="chaos-nemesis", daemon=True)]
    for worker in workers:
        worker.start()
    workers[0].join(timeout=spec.duration_s + 180)
    executor.stop.set()
    schedule.stop.set()
    for worker in workers:
        worker.join(timeout=300)


def _recover(engine: EngineProcess, notes: list[str]) -> None:
    """A run ends with its engine running with no fault injected: the control file reset,
    the engine continued if stopped, started if dead, killed and started again if it does
    not answer (each noted)."""
    write_control(engine.control, Control())
    pid = engine.pid()
    if pid is not None and process_state(pid) == "T":
        engine.signal(signal.SIGCONT, pid)
    if pid is not None and alive(pid):
        with contextlib.suppress(EngineFailed):
            engine.wait_ready(20)
            return
        notes.append(f"the engine (pid {pid}) did not answer after the nemeses: killed")
        engine.signal(signal.SIGKILL, pid)
        engine.wait_gone(pid)
    else:
        notes.append("the engine was not running after the nemeses: started again")
    engine.start()


def _reopen(executor: Executor) -> None:
    """Operator cleanup: every lane the workload closed opened, every shard it paused
    resumed (recorded as operations like any other)."""
    done: set[tuple[str, str]] = set()
    for item in executor.planned:
        if item.kind == "lane_close" and item.target and ("lane", item.target) not in done:
            done.add(("lane", item.target))
            executor.execute(Planned(ref=f"cleanup-{item.target}", at_ms=0, kind="lane_open",
                                     target=item.target))
        if item.kind == "shard_pause" and item.target and ("shard", item.target) not in done:
            done.add(("shard", item.target))
            executor.execute(Planned(ref=f"cleanup-{item.target}", at_ms=0,
                                     kind="shard_resume", target=item.target))


def _quiesce(busy: Callable[[], str | None], consumers: Consumers, timeout_s: float,
             notes: list[str]) -> bool:
    """Until ``busy`` says the engine is quiet (see the module docstring) and the consumers
    caught up, or ``timeout_s`` passed."""
    end = time.monotonic() + timeout_s
    last = "no status"
    quiet_since: float | None = None
    while time.monotonic() < end:
        why = busy()
        if why is None:
            quiet_since = quiet_since or time.monotonic()
            # two evidence scans' worth of quiet, and the consumers caught up
            if time.monotonic() - quiet_since >= 2.5 and _now_ms() - consumers.last_ms > 1_000:
                return True
        else:
            quiet_since = None
            last = why
        time.sleep(0.25)
    notes.append(f"not quiet within {timeout_s} s: {last}")
    return False


def _busy(engine: EngineProcess) -> str | None:
    """Why the engine is not quiet yet (None: it is)."""
    status = engine.status(timeout=10)
    if status is None:
        return "the engine does not answer"
    for shard in status["shards"]:
        if shard["state"] != "ACTIVE" or shard["lag"] or shard["in_flight"] or shard["claims"]:
            return (f"shard {shard['shard']} {shard['state']} lag {shard['lag']} in flight "
                    f"{shard['in_flight']} claims {shard['claims']}")
    for lane in status["lanes"]:
        if lane["messages_by_state"].get("PUBLISHING"):
            return f"lane {lane['lane']} has PUBLISHING messages"
    scheduled = _messages(engine, "SCHEDULED")
    if scheduled is None:
        return "the message list did not answer"
    uncertain = _messages(engine, "UNCERTAIN") or []
    held = {(m["lane"], m["key"]) for m in uncertain if m["key"] is not None}
    now = _now_ms()
    for message in scheduled:
        if (message["lane"], message["key"]) in held:
            continue  # an UNCERTAIN head holds its ORDERED key until someone resolves it
        if message["deliver_at_ms"] <= now:
            return f"{message['delay_message_id']} is due and still SCHEDULED"
        return f"{message['delay_message_id']} is not due yet"
    return None


def _messages(engine: EngineProcess, state: str) -> list[dict[str, Any]] | None:
    out: list[dict[str, Any]] = []
    after: str | None = None
    try:
        while True:
            page = engine.admin(10).get("/v1/messages", state=state, limit=5_000, after=after)
            out += page["messages"]
            after = page.get("next_cursor")
            if not after:
                return out
    except Exception:
        return None


def _settle(consumers: Consumers, quiet_ms: int = 1_000, deadline_s: float = 15.0) -> None:
    """Until the consumers have read nothing new for ``quiet_ms``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and _now_ms() - consumers.last_ms < quiet_ms:
        time.sleep(0.1)


def lateness_p99(facts: Facts) -> int | None:
    """p99 of (first read - max(deliverAt, the schedule's invoke time)) over every message
    a consumer read."""
    firsts: dict[str, Seen] = {}
    for line in facts.seen:
        seen = line.entry
        assert isinstance(seen, Seen)
        if seen.delay_message_id not in firsts or seen.received_ms < \
                firsts[seen.delay_message_id].received_ms:
            firsts[seen.delay_message_id] = seen
    late: list[int] = []
    for message_id, seen in firsts.items():
        attempt = facts.attempts.get(seen.attempt_id)
        deliver = facts.deliver_at(message_id, attempt[0].generation if attempt else None)
        deliver = deliver if deliver is not None else seen.deliver_at_ms
        if deliver is None:
            continue
        op_line = facts.schedule_op(message_id)
        invoked = op_line.entry.invoke_ms if op_line and isinstance(op_line.entry, Op) else 0
        late.append(seen.received_ms - max(deliver, invoked))
    if not late:
        return None
    late.sort()
    return late[min(len(late) - 1, int(len(late) * 0.99))]

