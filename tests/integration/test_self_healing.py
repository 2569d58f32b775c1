"""Workers that heal themselves: a failing lane and a lost Shard Log, no engine restart.

1. **A lane whose destination fails** (the real daemon, driven by the CLI): the `local`
   lane's outbox file is replaced by a directory, so the file destination cannot open it.
   The first publish into it fails and the lane goes NOT READY; the fault is removed; every
   due message then publishes within 30 s, none twice, none early, and the daemon's pid
   never changes. Before the engine's event log was typed, that first failed publish raised
   ``TypeError`` on the publisher thread and the lane stayed NOT READY until a restart.
2. **A shard loop that loses its Shard Log** (in-process, the file log wrapped so appends
   and reads fail while ``down`` is set): the loop's worker crashes, is restarted with
   backoff, and resumes when the log returns; the attempts that were in flight settle as
   PUBLISHED (their outcomes were held, then appended), none becomes UNCERTAIN.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt, ShardLog
from nereus.engine.runtime.supervisor import WorkerStatus
from nereus.layout import HomeLayout
from nereus.timespec import parse_time_ms
from tests.conftest import run_nereus
from tests.daemon import engine_pid, read_outbox, running_engine
from tests.integration import engine_harness
from tests.integration.doubles import DelegatingLog, QuietDestination
from tests.integration.engine_harness import now_ms
from tests.polling import wait_until


def cli_json(home: Path, *args: str) -> Any:
    result = run_nereus("--json", *args, home=home, timeout=60)
    assert result.code == 0, (args, result.stdout, result.stderr)
    return result.json()


def local_lane(home: Path) -> dict[str, Any]:
    status = cli_json(home, "engine", "status")
    (lane,) = [lane for lane in status["lanes"] if lane["lane"] == "local"]
    return dict(lane)


def schedule_batch(home: Path, ids: list[str], delay: str) -> None:
    batch = home / f"batch-{ids[0]}.jsonl"
    batch.write_text("".join(json.dumps({"id": mid, "lane": "local", "delay": delay,
                                         "payload": mid}) + "\n" for mid in ids))
    result = run_nereus("--json", "message", "schedule", "--batch", str(batch), "--wait",
                        home=home, timeout=60)
    assert result.code == 0, result.stdout + result.stderr


@pytest.mark.timeout(180)
def test_a_failing_lane_heals_without_an_engine_restart(tmp_path: Path) -> None:
    """NOT READY while its file cannot be opened; every due message published once the
    fault is gone, within 30 s, none twice, none early, same daemon pid throughout."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "2", home=home).code == 0
    outbox = HomeLayout(home).outbox / "local.jsonl"
    with running_engine(home):
        pid = engine_pid(home)
        schedule_batch(home, ["warm-up"], "0s")
        wait_until("the first publish", lambda: len(read_outbox(outbox)) == 1, 30)
        aside = outbox.with_name("local.jsonl.aside")
        outbox.rename(aside)
        outbox.mkdir()  # the fault: the lane's file is now a directory
        ids = [f"heal-{n}" for n in range(20)]
        schedule_batch(home, ids, "1s")
        wait_until("the lane NOT READY after a failed publish",
                   lambda: local_lane(home)["readiness"] == "NOT_READY", 30)
        assert "Is a directory" in (local_lane(home)["not_ready_reason"] or "")
        outbox.rmdir()
        aside.rename(outbox)  # the fault is removed
        healed_at = now_ms()
        wait_until("every due message published after the fault was removed",
                   lambda: len(read_outbox(outbox)) >= 21, 30)
        published_by = now_ms()
        lines = read_outbox(outbox)
        assert published_by - healed_at <= 30_000
        assert engine_pid(home) == pid, "the engine was restarted"
        status = cli_json(home, "engine", "status")
        publisher = [w for w in status["workers"] if w["name"] == "publisher-local"]
        assert publisher and publisher[0]["state"] == "RUNNING", status["workers"]
        shown = {mid: cli_json(home, "message", "show", mid)["state"] for mid in ids}
        assert set(shown.values()) == {"PUBLISHED"}, shown
    ids_seen = [line["delay_message_id"] for line in lines]
    assert sorted(ids_seen) == sorted(["warm-up", *ids]), "a message was published twice"
    early = [line for line in lines
             if parse_time_ms(line["published_at"]) < parse_time_ms(line["deliver_at"])]
    assert not early, early


class FlakyLog(DelegatingLog):
    """A Shard Log that fails every append and read while ``down`` is set (a lost broker)."""

    def __init__(self, inner: ShardLog) -> None:
        super().__init__(inner)
        self.down = threading.Event()
        self.failed_calls = 0

    def _check(self) -> None:
        if self.down.is_set():
            self.failed_calls += 1
            raise ConnectionError("the Command Topic is unreachable")

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        self._check()
        return self.inner.append(payloads)

    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        self._check()
        return self.inner.read(from_position, max_records)


@pytest.mark.timeout(120)
def test_a_shard_loop_resumes_after_its_log_comes_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log fails for a while under in-flight publishes: the loop's worker restarts
    with backoff, resumes by itself, and no in-flight attempt becomes UNCERTAIN."""
    from nereus.engine.process import home_engine as engine_module

    flaky: list[FlakyLog] = []

    def open_flaky(*args: Any, **kwargs: Any) -> FlakyLog:
        log = FlakyLog(open_shard_log(*args, **kwargs))
        flaky.append(log)
        return log

    monkeypatch.setattr(engine_module, "open_shard_log", open_flaky)
    gate = threading.Event()

    class HeldDestination(QuietDestination):
        """Publishes to a file, but holds each call until ``gate`` opens (in flight)."""

        def __init__(self, path: Path) -> None:
            from nereus.adapters.backends.destination.file_outbox import FileDestination

            self.file = FileDestination("local", path)

        def publish(self, requests: Any, now: Any) -> Any:
            gate.wait(30)
            return self.file.publish(requests, now)

    home = tmp_path / "home"
    destination = HeldDestination(home / "outbox" / "local.jsonl")
    with engine_harness.in_process_engine(home, partitions=1,
                                       destinations={"local": destination}) as h:
        engine = h.engine
        ids = [f"m{n}" for n in range(5)]
        h.queue([h.schedule(mid, now_ms() - 1) for mid in ids])
        wait_until("five attempts in flight",
                   lambda: sum(loop.in_flight for loop in engine.shards.values()) == 5, 20)
        (log,) = flaky
        log.down.set()
        gate.set()  # the publishes finish while the log is down: their outcomes are held
        (loop,) = engine.shards.values()

        def shard_worker() -> WorkerStatus:
            return next(w for w in engine.workers() if w.kind == "shard")

        name = shard_worker().name
        wait_until("the shard loop restarted after failing", lambda: shard_worker().restarts >= 2,
                   20)
        assert loop.state == "DEGRADED"
        log.down.clear()
        wait_until("the loop ACTIVE again with nothing in flight",
                   lambda: loop.state == "ACTIVE" and loop.in_flight == 0, 20)
        wait_until("five published", lambda: len(h.outbox()) == 5, 20)
        states = {}
        from nereus.views import find_message

        for mid in ids:
            message = find_message(loop.store, mid)
            assert message is not None
            states[mid] = message.state
        assert set(states.values()) == {"PUBLISHED"}, states
        after = shard_worker()
        assert after.name == name and after.state == "RUNNING"
        assert after.last_error is not None and "unreachable" in after.last_error
