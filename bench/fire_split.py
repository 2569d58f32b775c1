"""Where a published message's engine CPU goes: ``bench/fire.py`` with the shard loop's
CPU split by phase.

Usage::

    .venv/bin/python bench/fire_split.py [--level L] [--burst N] [other fire.py options]

Runs one ``bench/fire.py --only burst --baseline-level 0`` (one level, one round, unless
the options say otherwise; then the figures mix the runs), with the phases of the publish
path wrapped, for this run only, in a timer of the calling thread's CPU
(``time.thread_time``); product code is unchanged. Counting starts at the first admission
applied (``burst``'s due instant, near enough), and each phase's CPU is divided by the
messages published. The wrapped phases nest (a batch's ``_on_applied`` holds its
members'; a turn's ``schedule`` holds its planner round), so the rows are not to be
summed; each timer also costs about a microsecond a call. The other threads' CPU (the
lane publisher, the destination's calls) is printed as a total per thread, from their
start.
"""

from __future__ import annotations

import functools
import importlib
import runpy
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

MESSAGES_FLAG = "--burst"
DEFAULT_MESSAGES = 20_000
ONE_BURST = ("--only", "burst", "--baseline-level", "0")  # before the caller's options


class Split:
    """CPU of the shard loop's phases, from the first admission applied."""

    def __init__(self) -> None:
        self.on = False
        self.cpu: dict[str, float] = {}
        self.calls: Counter[str] = Counter()
        self.threads: list[tuple[str, float]] = []

    def time(self, owner: Any, name: str, label: str) -> None:
        """Wrap ``owner.name`` (on shard threads) in a CPU timer counted under ``label``."""
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not threading.current_thread().name.startswith("shard"):
                return original(*args, **kwargs)
            began = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                if self.on:
                    self.cpu[label] = self.cpu.get(label, 0.0) + time.thread_time() - began
                    self.calls[label] += 1

        setattr(owner, name, timed)

    def start_at_first_publish(self) -> None:
        """Time the state machine's ``apply`` as the runner calls it, and start counting
        when it first applies an admission, an outcome or a batch of them."""
        shard_runner: Any = importlib.import_module("nereus.adapters.offline.shard_runner")
        from nereus.records.system import PublishAdmission, PublishBatch, PublishOutcome

        kinds = (PublishAdmission, PublishBatch, PublishOutcome)
        original = shard_runner.apply

        def apply(*args: Any, **kwargs: Any) -> Any:
            began = time.thread_time()
            applied = original(*args, **kwargs)
            if type(applied.record) in kinds:
                self.on = True
            if self.on:
                label = "machine: apply (all records)"
                self.cpu[label] = self.cpu.get(label, 0.0) + time.thread_time() - began
            return applied

        shard_runner.apply = apply

    def total_per_thread(self, owner: Any, name: str) -> None:
        """Note the thread's CPU when ``owner.name`` (a worker thread's body) returns."""
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        def body(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            finally:
                self.threads.append((threading.current_thread().name, time.thread_time()))

        setattr(owner, name, body)

    def report(self, messages: int) -> list[str]:
        out = [f"CPU per published message by phase ({messages:,} messages; nested rows "
               "overlap):"]
        out.extend(f"  {cpu / messages * 1e6:7.1f} us  {label}  ({self.calls[label]:,} calls)"
                   for label, cpu in sorted(self.cpu.items(), key=lambda kv: -kv[1]))
        out.extend(f"  thread {name}: {cpu:.3f} s CPU in all" for name, cpu in self.threads)
        return out


def install(split: Split) -> None:
    """The phases of the publish path (names as of this build)."""
    from nereus.adapters.backends.shardlog.file_log import FileShardLog
    from nereus.engine.metrics.shard_counters import ShardMetrics
    from nereus.engine.publishing.destination_calls import DestinationCalls
    from nereus.engine.publishing.lane_publisher import LanePublisher
    from nereus.engine.scheduler.planner import Planner
    from nereus.engine.shard.admissions import AdmissionFlow
    from nereus.engine.shard.owner_loop import ShardLoop
    from nereus.state.store import ShardStore

    split.start_at_first_publish()
    for owner, name, label in (
        (ShardStore, "write", "store: WriteBatch written (runner batches, claim rows)"),
        (FileShardLog, "read", "log: read"),
        (FileShardLog, "append", "log: append (synced)"),
        (ShardLoop, "_on_applied", "shell: act on applied (a batch counts its members twice)"),
        (AdmissionFlow, "on_applied", "shell:   events and their handlers"),
        (importlib.import_module("nereus.machine.apply"), "events_of", "shell:     events_of"),
        (AdmissionFlow, "_on_admission", "shell:     admission won: hand-over"),
        (AdmissionFlow, "_gate_closed", "shell:       hand-over gate"),
        (AdmissionFlow, "_on_settled", "shell:     outcome: claim released"),
        (ShardMetrics, "observe", "shell:   metrics"),
        (AdmissionFlow, "schedule", "claim: a turn's round, admissions prepared, claim rows"),
        (Planner, "round", "claim:   planner round"),
        (Planner, "_visit", "claim:     one due entry checked and claimed"),
        (AdmissionFlow, "take_outcomes", "outcome records made"),
    ):
        split.time(owner, name, label)
    split.total_per_thread(ShardLoop, "run")
    split.total_per_thread(LanePublisher, "run")
    split.total_per_thread(DestinationCalls, "_serve")


def _messages(argv: list[str]) -> int:
    return int(argv[argv.index(MESSAGES_FLAG) + 1]) if MESSAGES_FLAG in argv else \
        DEFAULT_MESSAGES


def main() -> None:
    split = Split()
    install(split)
    bench = __file__.replace("fire_split.py", "fire.py")
    sys.argv = [bench, *ONE_BURST, *sys.argv[1:]]
    try:
        runpy.run_path(bench, run_name="__main__")
    finally:
        print("\n".join(split.report(_messages(sys.argv))))


if __name__ == "__main__":
    main()
