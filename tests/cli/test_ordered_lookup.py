"""A keyed message of an ORDERED lane lives on its key's shard, not its id's: ``message
show`` finds it by id with worker processes too (each worker owns some shards), applied or
only queued (with ``--barrier``). Found by the chaos runs (tests/chaos/test_found_by_chaos.py):
the barrier went to the id's shard only, and a worker looked in its own shards only."""

from __future__ import annotations

from pathlib import Path

import pytest

from nereus.client.prepare import RouteRef
from nereus.shard import ShardId
from tests.cli.engine_homes import one_json
from tests.conftest import run_nereus
from tests.polling import wait_until

ORDERED = '\n[lanes.ord]\ndestination = "file"\npath = "outbox/ord.jsonl"\nordered = true\n'


def _placed_apart(partitions: int) -> tuple[str, str, ShardId]:
    """An id and a key the ORDERED lane ``ord`` places on another shard than the id's."""
    route = RouteRef(name="default", partitions=partitions, ordered_lanes=frozenset({"ord"}))
    for n in range(1_000):
        mid, key = f"m{n}", f"key-{n % 7}"
        placed = route.placement(mid, "ord", key)
        if placed != route.shard_for(mid):
            return mid, key, placed
    raise AssertionError("no id and key placed apart")


@pytest.mark.timeout(180)
def test_a_keyed_message_is_found_by_id_across_worker_processes(tmp_path: Path) -> None:
    """Two worker processes, four shards: a message of lane ``ord`` with a key placed on
    another shard (and worker) than its id's is shown by ``message show --barrier`` right
    after it is queued, and by ``message show`` once applied, on its key's shard."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "4", home=home).code == 0
    config = home / "nereus.toml"
    config.write_text(config.read_text() + ORDERED)
    mid, key, placed = _placed_apart(4)
    started = run_nereus("--json", "engine", "start", "--workers", "2", "--timeout", "60",
                         home=home, timeout=90)
    assert started.code == 0, started.stdout + started.stderr
    try:
        queued = run_nereus("--json", "message", "schedule", "--lane", "ord", "--key", key,
                            "--id", mid, "--delay", "1h", home=home)
        assert queued.code == 0, queued.stdout + queued.stderr
        shown = run_nereus("--json", "message", "show", mid, "--barrier", home=home)
        assert shown.code == 0, shown.stdout + shown.stderr
        document = one_json(shown)
        assert document["shard"] == str(placed) and document["state"] == "SCHEDULED", document
        plain = wait_until("message show without "
                         "a barrier", lambda: _shown(home, mid), 30)
        assert plain["shard"] == str(placed)
    finally:
        stop = run_nereus("engine", "stop", "--timeout", "60", home=home, timeout=90)
        assert stop.code == 0, stop.stdout + stop.stderr


def _shown(home: Path, mid: str) -> dict[str, object] | None:
    shown = run_nereus("--json", "message", "show", mid, home=home)
    return one_json(shown) if shown.code == 0 else None
