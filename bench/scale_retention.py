"""``bench/scale.py``'s retention: a lane with ``retention = "5s"`` on a route of 4 shards.

N messages due at once are published; the bench waits until the engine's counters hold
no PUBLISHED message (the sweep removed them, decided by broker time in the log), stops
the engine, counts what is left of them in each shard's store (messages and attempts),
and replays every shard's log from empty, comparing with the live digest
(``nereus shard replay SHARD --compare live``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import msgspec

from inprocess_engine import Due, now_ms, queue_due
from nereus.layout import HomeLayout
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from scale_engine import ROUTE, Daemon, make_home, nereus, open_logs, wait_until

PARTITIONS = 4
RETENTION = "5s"


class RetentionFigures(msgspec.Struct, frozen=True):
    retention: str
    messages: int
    published: int
    swept_after_s: float
    terminal_left: int
    attempts_left: int
    replay_matches: bool


def _left(home: Path) -> tuple[int, int]:
    """(messages, attempts) still in the shards' stores."""
    messages = attempts = 0
    for p in range(PARTITIONS):
        path = HomeLayout(home).shard_state(ShardId(ROUTE, p))
        with ShardStore.open(path, read_only=True) as store:
            messages += sum(1 for _ in store.scan_prefix(keys.MSG))
            attempts += sum(1 for _ in store.scan_prefix(keys.ATTEMPT))
    return messages, attempts


def retention(root: Path, count: int, deadline_s: float) -> RetentionFigures:
    home = make_home(root, "scale-retention-", partitions=PARTITIONS,
                     lanes={"local": f'retention = "{RETENTION}"\n'})
    daemon = Daemon.start(home)
    try:
        wait_until(daemon.all_active, 120, "every shard ACTIVE")
        logs = open_logs(home)
        try:
            due_ms = now_ms() + 500
            queue_due(logs, (Due(f"r{i}", f"k{i % 97}", due_ms) for i in range(count)),
                      lane="local")
        finally:
            logs.close()
        wait_until(lambda: daemon.states().get("PUBLISHED", 0) >= count, deadline_s,
                   f"{count} published", 0.05)
        published_at = time.monotonic()
        published = daemon.states().get("PUBLISHED", 0)
        wait_until(lambda: not daemon.states(), deadline_s, "every terminal message swept",
                   0.1)
        swept_s = time.monotonic() - published_at
    finally:
        daemon.stop()
    messages, attempts = _left(home)
    matches = True
    for p in range(PARTITIONS):
        _, out = nereus(home, "shard", "replay", f"{ROUTE}/{p}", "--empty", "--compare", "live",
                        "--json")
        matches = matches and bool(json.loads(out)["match"])
    return RetentionFigures(retention=RETENTION, messages=count, published=published,
                            swept_after_s=round(swept_s, 1), terminal_left=messages,
                            attempts_left=attempts, replay_matches=matches)
