"""Nemeses: faults a chaos run injects, each with its own recovery.

A ``Nemesis`` has ``start`` (inject) and ``heal`` (recover), each returning a line for the
history; ``injected(nemesis, ctx)`` is the context manager that pairs them, so nemeses
compose (``Composed`` starts several and heals them in reverse). ``Schedule`` runs them
over a run: a seeded pause, one nemesis started, held a seeded while, healed, again until
the run's end, and heals whatever is still injected when it stops. Every start and heal
is written to the history as a ``Fault``.

Built, in order of value:

* ``sigkill``: SIGKILL the engine; heal: start it again (recovery from the Shard Log).
* ``restart``: ``nereus engine stop`` (graceful), then start again.
* ``sigstop``: SIGSTOP the engine (every thread frozen, its lock and socket still held);
  heal: SIGCONT.
* ``worker-kill`` / ``worker-stop``: the same to one worker process of ``engine start
  --workers 2``; heal: wait until every shard is ACTIVE again (the front door restarts a
  dead worker) / SIGCONT.
* ``refuse``, ``slow``, ``hang``, ``fail-after-write``: a lane's destination refuses (NOT
  READY), answers slowly, hangs holding its permits, or loses its answer after the write;
  through the chaos engine child's control file (``tests.chaos.control``). ``dir-fault`` and
  ``fifo-fault``: a file lane's path replaced by a directory (every open fails) or by a
  FIFO (an open for writing hangs until a reader comes; bytes written into it are gone),
  with no test hook at all.
* ``clock-step``: the engine's wall clock stepped forwards or back (``clock_offset_ms``),
  inside and beyond the Trusted UTC bound; heal: back to true time.
* ``checkpoint-restore``: ``nereus checkpoint create`` of a shard, SIGKILL, the shard's
  database moved aside, ``nereus checkpoint restore`` into its place; heal: start (the
  engine replays from the checkpoint to the log's end).
* ``kafka-outage`` / ``pulsar-outage`` / ``s3-outage``: ``scripts/services down|up`` (stops
  a server other tests share: such tests are ``serial``); S3 holds the home's objects
  (checkpoints, large payloads) when the run's brokers name it.
* ``full-disk``: the home is a small tmpfs; a ballast file fills it; heal: remove it.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tests.chaos.client import Recorder, run_cli
from tests.chaos.control import Control, LaneFault, read_control, write_control
from tests.chaos.engine_process import EngineProcess
from tests.chaos.history import Fault

ROOT = Path(__file__).resolve().parents[2]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class NemesisContext:
    """What a nemesis may touch: the engine, its control file, the home and its lanes."""

    engine: EngineProcess
    control: Path
    home: Path
    lanes: dict[str, str]  # lane -> destination (file, kafka, pulsar)
    rng: random.Random
    shards: list[str]

    def update_control(self, **changes: object) -> None:
        current = read_control(self.control)
        write_control(self.control, Control(**{**{
            "clock_offset_ms": current.clock_offset_ms, "lanes": dict(current.lanes),
            "slow_ms": current.slow_ms}, **changes}))  # type: ignore[arg-type]


class Nemesis(Protocol):
    name: str
    engine_wide: bool  # it stops every lane (lane isolation does not judge across it)

    def lanes(self) -> list[str]:
        """The lanes it faults (none: engine-wide or none in particular)."""
        ...

    def start(self, ctx: NemesisContext) -> str: ...

    def heal(self, ctx: NemesisContext) -> str: ...


# -- the engine process -------------------------------------------------------------------
@dataclass
class SigKill:
    name: str = "sigkill"
    engine_wide: bool = True

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        pid = ctx.engine.signal(signal.SIGKILL)
        ctx.engine.wait_gone(pid)
        return f"SIGKILL engine pid {pid}"

    def heal(self, ctx: NemesisContext) -> str:
        ctx.engine.start()
        return f"engine started again, pid {ctx.engine.pid()}"


@dataclass
class Restart:
    """``nereus engine stop`` (graceful: attempts that never reached their destination are
    declined, a call still running at the deadline is UNKNOWN); heal: start again."""

    name: str = "restart"
    engine_wide: bool = True

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        pid = ctx.engine.pid()
        ctx.engine.stop()
        return f"engine stop (pid {pid})"

    def heal(self, ctx: NemesisContext) -> str:
        ctx.engine.start()
        return f"engine started again, pid {ctx.engine.pid()}"


@dataclass
class SigStop:
    name: str = "sigstop"
    engine_wide: bool = True
    _pid: int | None = None

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        self._pid = ctx.engine.signal(signal.SIGSTOP)
        return f"SIGSTOP engine pid {self._pid}"

    def heal(self, ctx: NemesisContext) -> str:
        assert self._pid is not None
        ctx.engine.signal(signal.SIGCONT, self._pid)
        return f"SIGCONT engine pid {self._pid}"


@dataclass
class WorkerSignal:
    """SIGKILL (``kill``) or SIGSTOP one worker process of ``engine start --workers N``."""

    kill: bool
    name: str = ""
    engine_wide: bool = True
    _pid: int | None = None

    def __post_init__(self) -> None:
        self.name = self.name or ("worker-kill" if self.kill else "worker-stop")

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        workers = ctx.engine.worker_pids()
        if not workers:
            return "no worker process to signal"
        self._pid = ctx.rng.choice(workers)
        ctx.engine.signal(signal.SIGKILL if self.kill else signal.SIGSTOP, self._pid)
        return f"{'SIGKILL' if self.kill else 'SIGSTOP'} worker pid {self._pid}"

    def heal(self, ctx: NemesisContext) -> str:
        if self._pid is None:
            return "nothing to heal"
        if not self.kill:
            with contextlib.suppress(ProcessLookupError):
                ctx.engine.signal(signal.SIGCONT, self._pid)
        ctx.engine.wait_ready(120)
        return f"{'every shard ACTIVE again' if self.kill else 'SIGCONT'} (worker {self._pid})"


# -- destinations --------------------------------------------------------------------------
@dataclass
class DestinationFault:
    """A control-file fault on ``targets`` (lanes), through the chaos engine child."""

    kind: LaneFault
    targets: Sequence[str]
    name: str = ""
    engine_wide: bool = False

    def __post_init__(self) -> None:
        self.name = self.name or self.kind.replace("_", "-")

    def lanes(self) -> list[str]:
        return list(self.targets)

    def start(self, ctx: NemesisContext) -> str:
        lanes = dict(read_control(ctx.control).lanes)
        lanes.update(dict.fromkeys(self.targets, self.kind))
        ctx.update_control(lanes=lanes)
        return f"lanes {', '.join(self.targets)}: {self.kind}"

    def heal(self, ctx: NemesisContext) -> str:
        lanes = {k: v for k, v in read_control(ctx.control).lanes.items()
                 if k not in self.targets}
        ctx.update_control(lanes=lanes)
        return f"lanes {', '.join(self.targets)}: healthy"


@dataclass
class FilePathFault:
    """A file lane's outbox path replaced by a directory (``directory``: every open fails:
    NOT_PUBLISHED RETRIABLE, NOT READY) or a FIFO (``fifo``: a probe's open for writing
    hangs until a reader comes; what a publish writes into it is lost when it closes)."""

    kind: str  # directory | fifo
    target: str
    name: str = ""
    engine_wide: bool = False
    _aside: Path | None = None
    _planted: Path | None = None

    def __post_init__(self) -> None:
        self.name = self.name or ("dir-fault" if self.kind == "directory" else "fifo-fault")

    def lanes(self) -> list[str]:
        return [self.target]

    def _path(self, ctx: NemesisContext) -> Path:
        return ctx.home / "outbox" / f"{self.target}.jsonl"

    def start(self, ctx: NemesisContext) -> str:
        path = self._path(ctx)
        path.touch(exist_ok=True)
        self._aside = path.with_name(path.name + ".chaos-aside")
        os.rename(path, self._aside)
        if self.kind == "directory":
            path.mkdir()
        else:
            os.mkfifo(path)
        self._planted = path
        return f"{path} is now a {self.kind}"

    def heal(self, ctx: NemesisContext) -> str:
        assert self._aside is not None and self._planted is not None
        path = self._planted
        moved = path.with_name(path.name + f".chaos-{self.kind}-{now_ms()}")
        os.rename(path, moved)  # the path is free: no new open can reach the fault
        os.rename(self._aside, path)
        if stat.S_ISFIFO(os.lstat(moved).st_mode):
            # a reader releases every open for writing blocked on the FIFO
            reader = os.open(moved, os.O_RDONLY | os.O_NONBLOCK)
            time.sleep(0.2)
            with contextlib.suppress(BlockingIOError):
                while os.read(reader, 1 << 16):
                    pass
            os.close(reader)
            moved.unlink()
        else:
            shutil.rmtree(moved, ignore_errors=True)
        return f"{path} is the outbox file again"


# -- the clock -----------------------------------------------------------------------------
@dataclass
class ClockStep:
    """The engine's wall clock stepped by a seeded amount from ``steps_ms`` (forwards and
    back, inside and beyond the Trusted UTC bound); heal: true time again."""

    steps_ms: Sequence[int] = (800, 3_000, -2_000, -600)
    name: str = "clock-step"
    engine_wide: bool = True

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        step = ctx.rng.choice(list(self.steps_ms))
        ctx.update_control(clock_offset_ms=step)
        return f"engine wall clock stepped {step:+d} ms"

    def heal(self, ctx: NemesisContext) -> str:
        ctx.update_control(clock_offset_ms=0)
        return "engine wall clock back to true time"


# -- checkpoints -----------------------------------------------------------------------------
@dataclass
class CheckpointRestore:
    """A checkpoint of one shard, the engine killed, the shard's database lost and restored
    from that checkpoint with ``nereus checkpoint restore``; heal: the engine starts and
    replays the rest of the log."""

    name: str = "checkpoint-restore"
    engine_wide: bool = True
    restores: int = 0

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        shard = ctx.rng.choice(ctx.shards)
        made = run_cli(ctx.home, "checkpoint", "create", shard, timeout=120)
        checkpoint = str(made["checkpoint_id"])
        time.sleep(ctx.rng.uniform(0.2, 1.0))  # the log runs on past the checkpoint
        pid = ctx.engine.signal(signal.SIGKILL)
        ctx.engine.wait_gone(pid)
        route, partition = shard.split("/")
        state = ctx.home / "state" / route / partition
        lost = state.with_name(f"{partition}.chaos-lost-{now_ms()}")
        os.rename(state, lost)
        shutil.rmtree(lost, ignore_errors=True)
        run_cli(ctx.home, "checkpoint", "restore", checkpoint, "--into", str(state),
                timeout=120)
        self.restores += 1
        return f"{shard}: checkpoint {checkpoint}, SIGKILL pid {pid}, database restored from it"

    def heal(self, ctx: NemesisContext) -> str:
        ctx.engine.start()
        return f"engine started on the restored database, pid {ctx.engine.pid()}"


# -- servers ---------------------------------------------------------------------------------
@dataclass
class ServiceOutage:
    """``scripts/services down SERVICE``; heal: ``up`` (it stops a server other tests
    share: mark the test ``serial``)."""

    service: str
    name: str = ""
    engine_wide: bool = True

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.service}-outage"

    def lanes(self) -> list[str]:
        return []

    def _services(self, action: str) -> None:
        proc = subprocess.run([str(ROOT / "scripts" / "services"), action, self.service],
                              capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"scripts/services {action} {self.service}: "
                               f"{proc.stderr[-500:]}")

    def start(self, ctx: NemesisContext) -> str:
        self._services("down")
        return f"{self.service} stopped"

    def heal(self, ctx: NemesisContext) -> str:
        self._services("up")
        return f"{self.service} running again"


# -- the disk --------------------------------------------------------------------------------
@dataclass
class FullDisk:
    """The home's filesystem (a tmpfs the runner mounted) filled by a ballast file; heal:
    the ballast removed."""

    name: str = "full-disk"
    engine_wide: bool = True
    _ballast: Path | None = None

    def lanes(self) -> list[str]:
        return []

    def start(self, ctx: NemesisContext) -> str:
        self._ballast = ctx.home / "chaos-ballast"
        free = shutil.disk_usage(ctx.home).free
        with open(self._ballast, "wb") as handle:
            chunk = b"\0" * (1 << 20)
            with contextlib.suppress(OSError):
                while True:
                    handle.write(chunk)
                    handle.flush()
        left = shutil.disk_usage(ctx.home).free
        return f"the home's filesystem filled ({free} bytes free before, {left} after)"

    def heal(self, ctx: NemesisContext) -> str:
        if self._ballast is not None:
            self._ballast.unlink(missing_ok=True)
        return f"ballast removed ({shutil.disk_usage(ctx.home).free} bytes free)"


# -- composing and scheduling ----------------------------------------------------------------
@dataclass
class Composed:
    """Several nemeses at once: started in order, healed in reverse."""

    parts: Sequence[Nemesis]
    name: str = ""
    engine_wide: bool = False

    def __post_init__(self) -> None:
        self.name = self.name or "+".join(p.name for p in self.parts)
        self.engine_wide = any(p.engine_wide for p in self.parts)

    def lanes(self) -> list[str]:
        return [lane for p in self.parts for lane in p.lanes()]

    def start(self, ctx: NemesisContext) -> str:
        return "; ".join(p.start(ctx) for p in self.parts)

    def heal(self, ctx: NemesisContext) -> str:
        return "; ".join(p.heal(ctx) for p in reversed(self.parts))


@contextlib.contextmanager
def injected(nemesis: Nemesis, ctx: NemesisContext, recorder: Recorder) -> Iterator[None]:
    """``nemesis`` started for the block, healed after it (whatever happens), each written
    to the history."""
    detail = nemesis.start(ctx)
    recorder.write(Fault(nemesis=nemesis.name, phase="start", at_ms=now_ms(), detail=detail,
                         engine_wide=nemesis.engine_wide, lanes=nemesis.lanes()))
    try:
        yield
    finally:
        healed = nemesis.heal(ctx)
        recorder.write(Fault(nemesis=nemesis.name, phase="heal", at_ms=now_ms(),
                             detail=healed, engine_wide=nemesis.engine_wide,
                             lanes=nemesis.lanes()))


@dataclass
class Schedule:
    """Nemeses over a run: wait ``pause_s``, inject the next one (in a seeded order that
    cycles through all of them), hold it ``hold_s``, heal it; until ``duration_s`` has
    passed or ``stop`` is set."""

    nemeses: Sequence[Nemesis]
    ctx: NemesisContext
    recorder: Recorder
    duration_s: float
    pause_s: tuple[float, float] = (0.5, 2.0)
    hold_s: tuple[float, float] = (1.0, 3.0)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)
    injected_count: int = 0

    def run(self) -> None:
        if not self.nemeses:
            return
        rng = self.ctx.rng
        order = list(self.nemeses)
        rng.shuffle(order)
        end = time.monotonic() + self.duration_s
        turn = 0
        while not self.stop.is_set():
            if self.stop.wait(rng.uniform(*self.pause_s)) or time.monotonic() >= end:
                return
            nemesis = order[turn % len(order)]
            turn += 1
            hold = rng.uniform(*self.hold_s)
            try:
                with injected(nemesis, self.ctx, self.recorder):
                    self.injected_count += 1
                    self.stop.wait(min(hold, max(end - time.monotonic(), 0.2)))
            except Exception as exc:  # a nemesis that could not act: say so, go on
                self.errors.append(f"{nemesis.name}: {type(exc).__name__}: {exc}")
                if len(self.errors) > 5:
                    return
