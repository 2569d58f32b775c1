"""Lane gates under a real engine: quota limits the admission rate; a lane that is not
configured keeps its messages visible (UNCONFIGURED), and doctor warns about it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nereus.records import LaneConfig, encode
from nereus.shard import ShardId
from nereus.timespec import parse_time_ms
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.integration.engine_harness import in_process_engine, now_ms
from tests.polling import wait_until

QUOTA = 5
COUNT = 25


@pytest.mark.timeout(120)
def test_quota_limits_admissions_per_second(tmp_path: Path) -> None:
    """25 messages due at once on a lane with quota 5/s: all publish, and no one-second
    window of publish times holds more than one second of burst plus one of refill."""
    home = tmp_path / "home"
    with in_process_engine(home, partitions=1) as h:
        shard = ShardId("default", 0)
        h.append(shard, [encode(LaneConfig(lane="local", quota=QUOTA, operator="test",
                                           reason="rate limit", idempotency_key="quota"))])
        wait_until("the quota applied",
                   lambda: h.engine.shards[shard].lanes()["local"].quota == QUOTA, 10)
        due = now_ms()
        h.queue([h.schedule(f"m{n:02d}", due) for n in range(COUNT)])
        wait_until(f"all {COUNT} published", lambda: len(h.outbox()) == COUNT, 60)
        lines = h.outbox()
    times = sorted(parse_time_ms(line["published_at"]) for line in lines)
    busiest = max(sum(1 for t in times if start <= t < start + 1_000) for start in times)
    assert busiest <= 2 * QUOTA, f"{busiest} publishes in one second under quota {QUOTA}/s"
    assert times[-1] - times[0] >= (COUNT - 2 * QUOTA) * 1_000 // QUOTA - 500


def test_messages_on_an_unconfigured_lane_are_visible(tmp_path: Path) -> None:
    """A lane removed from nereus.toml with a message still due: `lane list` shows it
    UNCONFIGURED with its backlog, and `doctor` warns (exit 0) naming it."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "1", home=home).code == 0
    config = home / "nereus.toml"
    text = config.read_text()
    config.write_text(text + '\n[lanes.extra]\ndestination = "file"\npath = "outbox/x.jsonl"\n')
    scheduled = run_nereus("message", "schedule", "--lane", "extra", "--delay", "0s",
                           "--id", "orphan", "--payload", "p", home=home)
    assert scheduled.code == 0, scheduled.stderr
    config.write_text(text)  # the lane is gone from the configuration
    with running_engine(home):
        def extra() -> dict[str, object] | None:
            listed = run_nereus("--json", "lane", "list", home=home).json()
            return next((lane for lane in listed if lane["lane"] == "extra"
                         and lane["due_backlog"] == 1), None)

        lane = wait_until("the unconfigured lane listed", extra, 20)
        assert lane["readiness"] == "UNCONFIGURED" and lane["destination"] is None
        assert lane["messages_by_state"] == {"SCHEDULED": 1}
        assert "[lanes.extra]" in str(lane["not_ready_reason"])
    doctor = run_nereus("--json", "doctor", home=home)
    report = json.loads(doctor.stdout)
    (check,) = [c for c in report["checks"] if c["name"] == "lanes"]
    assert (check["ok"], check["severity"]) == (False, "warning")
    assert "extra (1 unfinished)" in check["detail"]
    assert doctor.code == 0 and report["ok"], report
