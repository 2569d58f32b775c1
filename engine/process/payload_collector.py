"""The engine's own ``payload gc``: every ``[engine] payload_gc_interval`` (default 1 h,
``"0s"`` off) a supervised worker collects the large payloads nobody can ever publish.

It judges exactly as ``nereus payload gc --yes`` does
(``nereus.adapters.offline.payload_collection``), never deleting an object a Recovery Set
member references (``check_floor`` is the last guard). A process that sees every shard of
the home (the single engine, the front door) judges the whole home (``judge_all``); a
cluster node, or each of its workers, judges the objects under the prefixes of the shards
ACTIVE there when the round starts (``judge_shards``), with the coordinator's Recovery
Floors. A failed round is logged and the next runs at its time.
"""

from __future__ import annotations

import threading
from typing import Protocol

from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.adapters.offline.payload_collection import (
    Judgement,
    delete_collected,
    judge_all,
    judge_shards,
)
from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.config import Config
from nereus.engine.runtime.event_log import EventLog, null_event_log, safe_event
from nereus.engine.runtime.supervisor import Supervised, Supervisor
from nereus.errors import UsageError
from nereus.layout import HomeLayout
from nereus.payload_objects import PREFIX
from nereus.shard import ShardId


class OwnedShards(Protocol):
    """The shards this process owns now (a node of a cluster: those ACTIVE here)."""

    def __call__(self) -> list[ShardId]: ...


class PayloadCollector:
    """The periodic collection of one home's large payloads (module docstring)."""

    def __init__(self, config: Config, layout: HomeLayout, objects: ObjectStore, *,
                 interval_s: float, owned: OwnedShards | None = None,
                 clock: Clock = SYSTEM_CLOCK, events: EventLog = null_event_log) -> None:
        """``owned``: judge only those shards' objects (a node of a cluster); without it,
        every object under ``payloads/`` against every shard of the home."""
        self._config = config
        self._owned = owned
        self._layout = layout
        self._objects = objects
        self.interval_s = interval_s
        self._clock = clock
        self._events = events
        self._stop = threading.Event()
        self._worker: Supervised | None = None
        # what ``metrics/payload_gc.py`` exposes (plain ints: one writer, this worker)
        self.rounds = 0  # collections that ran to the end
        self.failures = 0  # rounds that failed (a broker or the object store down, ...)
        self.deleted = 0  # objects deleted over all rounds
        self.deleted_bytes = 0
        self.last_success_ms: int | None = None  # wall clock, when the last round ended

    def start(self, supervisor: Supervisor) -> bool:
        """Run under ``supervisor`` when enabled (a positive interval); False when not."""
        if self.interval_s <= 0:
            return False
        self._worker = supervisor.spawn("payload-gc", "payload-gc", self.run)
        return True

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._worker is not None:
            self._worker.stopping()
            self._worker.join(timeout_s)

    def run(self) -> None:
        """Collect every ``interval_s`` of the Clock until asked to stop (a supervised
        worker body)."""
        while not self._clock.wait(self._stop, self.interval_s):
            try:
                self.collect_once()
            except UsageError as exc:
                self.failures += 1
                safe_event(self._events, "payload_gc_failed", level="warning",
                           error=exc.message)
            except Exception as exc:  # one failed round is reported; the next one runs
                self.failures += 1
                safe_event(self._events, "payload_gc_failed", level="warning",
                           error=f"{type(exc).__name__}: {exc}")

    def collect_once(self) -> list[Judgement]:
        """One round: judge every object in scope (the module docstring) and delete what
        may go."""
        objects = self._objects
        if self._owned is None:
            verdicts, floors = judge_all(self._config, self._layout, objects,
                                         objects.list(PREFIX), self._clock.wall_ms())
        else:
            verdicts, floors = judge_shards(self._config, self._layout, objects,
                                            self._owned(), self._clock.wall_ms())
        deleted = delete_collected(objects, verdicts, floors)
        size = sum(v.size_bytes for v in deleted)
        self.rounds += 1
        self.deleted += len(deleted)
        self.deleted_bytes += size
        self.last_success_ms = self._clock.wall_ms()
        if deleted:
            safe_event(self._events, "payload_gc", deleted=len(deleted), bytes=size,
                       kept=len(verdicts) - len(deleted),
                       keys=[v.key for v in deleted][:20])
        return deleted
