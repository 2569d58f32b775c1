"""The load of the crash loop in ``test_engine_crash.py``: what each round sends, and where
it kills the daemon.

A round starts a daemon (``python -m nereus.engine.hosting.daemon``, owned by the test), sends a
burst as an operator does (concurrent ``nereus message schedule --batch`` runs and
``nereus message cancel``) plus client-library cancels appended straight to the log, and
SIGKILLs it: during the burst, or while due messages are being published. ``Sent`` keeps
what was sent and the receipts that came back, for the checks afterwards.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.client import RouteRef, prepare_cancel, queue
from nereus.layout import HomeLayout
from tests.conftest import NEREUS
from tests.daemon import DaemonRun
from tests.integration.shard_logs import ShardLogs
from tests.polling import now_ms, wait_until

BATCHES_PER_ROUND = 3
BATCH_STAGGER_S = 0.2
BATCH_LINES = 1_000
IMMEDIATE_SHARE = 0.35  # due at once; the rest 1-3 s out
CLI_CANCELS_PER_ROUND = 2
LIBRARY_CANCELS_PER_ROUND = 150
PARTITIONS = 2
READY_DEADLINE_S = 20.0
CLI_DEADLINE_S = 60.0
POLL_S = 0.005


# commands -------------------------------------------------------------------------------
@dataclass
class Sent:
    """What the test sent, and the receipts it got back."""

    schedule_ids: list[str] = field(default_factory=list)
    later_ids: list[str] = field(default_factory=list)  # due 1-3 s after they were sent
    last_deliver_at_ms: int = 0
    receipts: list[dict[str, Any]] = field(default_factory=list)  # command_id, shard, position
    receipted_schedules: set[str] = field(default_factory=set)
    cli_runs: Counter[str] = field(default_factory=Counter)
    kills: list[str] = field(default_factory=list)
    owned: list[subprocess.Popen[bytes]] = field(default_factory=list)  # killed at the end


def write_batch(path: Path, rng: random.Random, prefix: str, sent: Sent) -> None:
    start = now_ms()
    lines = []
    for n in range(BATCH_LINES):
        message_id = f"{prefix}-{n}"
        if rng.random() < IMMEDIATE_SHARE:
            deliver_at_ms = start - rng.randrange(500)
        else:
            deliver_at_ms = start + rng.randrange(1_000, 3_000)
            sent.later_ids.append(message_id)
        sent.schedule_ids.append(message_id)
        sent.last_deliver_at_ms = max(sent.last_deliver_at_ms, deliver_at_ms)
        lines.append(json.dumps({
            "id": message_id, "lane": "local", "deliver_at": str(deliver_at_ms),
            "key": f"k{n % 31}", "headers": {"n": str(n)}, "payload": f"{prefix} {n} " * 4,
        }))
    path.write_text("\n".join(lines) + "\n")


def launch(home: Path, out: Path, sent: Sent,
           *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    """Start ``nereus --home H --json ARGS`` in the background, stdout into ``out``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    environ["NO_COLOR"] = "1"
    with open(out, "wb") as handle:
        proc = subprocess.Popen([NEREUS, "--home", str(home), "--json", *args],
                                stdin=subprocess.DEVNULL, stdout=handle,
                                stderr=subprocess.STDOUT, env=environ)
    sent.owned.append(proc)
    return proc, out


def collect(runs: list[tuple[subprocess.Popen[bytes], Path]], sent: Sent) -> None:
    """Wait for every CLI run; keep the receipts of those that answered (killed or not)."""
    for proc, out in runs:
        code = proc.wait(timeout=CLI_DEADLINE_S)
        text = out.read_text(errors="replace")
        sent.cli_runs["ok" if code == 0 else f"exit {code}"] += 1
        if code != 0:
            continue  # the engine died under it: the log alone says what was queued
        data = json.loads(text)
        for receipt in data.get("receipts", [data]):
            if receipt["kind"] == "SCHEDULE":
                sent.receipted_schedules.add(receipt["delay_message_id"])
            sent.receipts.append({"command_id": receipt["command_id"], "shard": receipt["shard"],
                                  "position": receipt["source_position"]})


def library_cancels(home: Path, ids: list[str], rng: random.Random, sent: Sent) -> None:
    """Cancels queued with the client library straight to the shards' file logs."""
    route = RouteRef("default", PARTITIONS)
    prepared = [prepare_cancel(route, command_id=f"cancel-{rng.getrandbits(64):016x}",
                               delay_message_id=message_id) for message_id in ids]
    with ShardLogs(lambda shard: FileShardLog(HomeLayout(home).shard_log(shard),
                                              create=False)) as logs:
        for item in queue(prepared, logs):
            sent.receipts.append({"command_id": item.prepared.command_id,
                                  "shard": str(item.prepared.shard), "position": item.position})


# the kills ------------------------------------------------------------------------------
def outbox_size(home: Path) -> int:
    try:
        return (HomeLayout(home).outbox / "local.jsonl").stat().st_size
    except FileNotFoundError:
        return 0


def crash_round(home: Path, run: int, kind: str, rng: random.Random, sent: Sent,
                work: Path) -> None:
    """Start a daemon, send a burst, SIGKILL it (``burst`` or ``publishing``).

    The batches start ``BATCH_STAGGER_S`` apart, so a burst kill lands while some run,
    some have not started (they then append straight to the log) and some are done.
    """
    daemon = DaemonRun(home, run, sent.owned)
    daemon.wait_ready(READY_DEADLINE_S)
    earlier = list(sent.later_ids)
    pending = []
    for b in range(BATCHES_PER_ROUND):
        path = work / f"batch-{run}-{b}.jsonl"
        write_batch(path, rng, f"r{run}b{b}", sent)
        pending.append((b, path))
    launched = time.monotonic()
    runs = [launch(home, work / f"cancel-{run}-{n}.out", sent, "message", "cancel", message_id)
            for n, message_id in enumerate(rng.sample(earlier, min(CLI_CANCELS_PER_ROUND,
                                                                   len(earlier))))]

    def launch_due(until: float) -> None:
        while pending and time.monotonic() < until:
            b, path = pending[0]
            if time.monotonic() < launched + b * BATCH_STAGGER_S:
                time.sleep(POLL_S)
                continue
            runs.append(launch(home, work / f"batch-{run}-{b}.out", sent, "message",
                               "schedule", "--batch", str(path)))
            pending.pop(0)

    if kind == "burst":
        kill_at = launched + rng.uniform(0.1, BATCHES_PER_ROUND * BATCH_STAGGER_S + 0.3)
        library_cancels(home, rng.sample(earlier, min(LIBRARY_CANCELS_PER_ROUND,
                                                      len(earlier))), rng, sent)
        launch_due(kill_at)
        time.sleep(max(kill_at - time.monotonic(), 0))  # a seeded instant inside the burst
        sent.kills.append(f"burst@{time.monotonic() - launched:.2f}s")
        daemon.kill()
        launch_due(float("inf"))  # the rest find no engine and append to the log directly
        collect(runs, sent)
        return
    launch_due(float("inf"))
    collect(runs, sent)
    fresh = sent.later_ids[len(earlier):]
    library_cancels(home, rng.sample(fresh, LIBRARY_CANCELS_PER_ROUND), rng, sent)
    not_before = launched + rng.uniform(1.0, 2.5)
    last = [outbox_size(home)]

    def publishing_now() -> bool:
        size = outbox_size(home)
        grew, last[0] = size > last[0], size
        return grew and time.monotonic() >= not_before

    wait_until("the outbox growing (publishing in progress)", publishing_now, 15.0,
               interval_s=0.002)
    sent.kills.append(f"publishing@{time.monotonic() - launched:.2f}s")
    daemon.kill()
