"""``bench/fire.py --profile``: pyinstrument inside every shard-loop and publisher thread.

A per-thread profiler has to start inside the thread, so while installed, the run method
of ``ShardLoop`` and ``LanePublisher`` (what the engine's supervisor runs in each worker
thread) is wrapped, here and only for the bench's run: product code is unchanged. The
sessions are merged into, per thread, time waiting against busy, the hottest functions
by self time and the inclusive time of the engine's phases.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

WORKER_BODY = "run"  # the method the engine's supervisor runs in each worker thread
WAITS = ("lock.acquire", "sleep", "wait ", "select")
PHASES = frozenset({
    "_apply", "_schedule", "_take_outcomes", "_expire_claims", "_on_applied", "round",
    "step", "apply", "write", "append", "read", "publish", "render_line", "lanes", "_paused",
    "_new_id", "uuid4", "_gate_closed", "_release", "submit",
})


class HotSpot(msgspec.Struct, frozen=True):
    where: str
    self_s: float


class ThreadProfile(msgspec.Struct, frozen=True):
    thread: str
    seconds: float
    waiting_s: float
    busy_s: float
    phases: dict[str, float]
    top_self: list[HotSpot]


def _thread_profile(name: str, session: Any, top: int) -> ThreadProfile:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    root = session.root_frame()
    stack = [root] if root is not None else []
    while stack:
        frame = stack.pop()
        stack.extend(frame.children)
        if frame.file_path is None and frame.function == "[self]":
            continue
        where = f"{frame.function} ({Path(frame.file_path or '?').name}:{frame.line_no})"
        own[where] += frame.total_self_time
        if frame.function in PHASES:
            inclusive[f"{frame.function} ({Path(frame.file_path or '?').name})"] += frame.time
    total = root.time if root is not None else 0.0
    waiting = sum(v for k, v in own.items() if k.startswith(WAITS))
    return ThreadProfile(
        thread=name, seconds=round(total, 3), waiting_s=round(waiting, 3),
        busy_s=round(total - waiting, 3),
        phases={k: round(v, 3) for k, v in inclusive.most_common()},
        top_self=[HotSpot(where=k, self_s=round(v, 3))
                  for k, v in own.most_common(top + 8) if not k.startswith(WAITS)][:top],
    )


class ThreadProfiles:
    """pyinstrument inside every shard-loop and publisher thread, merged afterwards."""

    def __init__(self) -> None:
        self.sessions: list[Any] = []
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        from nereus.engine.publishing.lane_publisher import LanePublisher
        from nereus.engine.shard.owner_loop import ShardLoop

        workers: tuple[type[ShardLoop | LanePublisher], ...] = (ShardLoop, LanePublisher)
        for cls in workers:
            original: Callable[[Any], None] = cls.run

            def profiled(self_: object, _original: Callable[[Any], None] = original) -> None:
                from pyinstrument import Profiler

                profiler = Profiler(interval=0.001)
                profiler.start()
                try:
                    _original(self_)
                finally:
                    session = profiler.stop()
                    with self._lock:
                        self.sessions.append((threading.current_thread().name, session))

            setattr(cls, WORKER_BODY, profiled)
            self._undo.append(functools.partial(setattr, cls, WORKER_BODY, original))

    def uninstall(self) -> None:
        for undo in self._undo:
            undo()

    def report(self, top: int) -> list[ThreadProfile]:
        """Per profiled thread: time waiting vs busy, the hottest functions by self time,
        and the inclusive time of the engine's phases."""
        return [_thread_profile(name, session, top) for name, session in self.sessions]
