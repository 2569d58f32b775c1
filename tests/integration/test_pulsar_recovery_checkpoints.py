"""Recovery on a Pulsar Command Topic counts the records it replayed towards
``[checkpoints] every_records``, not the distance between two positions: Pulsar's are
``ledger << 32 | entry``, so a fresh shard's first activation looked like billions of
records and took a checkpoint at once, on every start."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.integration.broker_homes import point_route_at
from tests.integration.pulsar_service import PulsarService, pulsar_service  # noqa: F401


def test_a_fresh_pulsar_shard_takes_no_checkpoint_for_its_activation(
        tmp_path: Path, pulsar_service: PulsarService) -> None:  # noqa: F811
    """A new Pulsar route, the defaults (every 100,000 records or hour): start, apply one
    command, stop. No checkpoint is catalogued and none is logged as taken."""
    endpoint = pulsar_service.require()
    route = f"r{uuid.uuid4().hex[:10]}"
    home = tmp_path / "home"
    made = run_nereus("init", "--log", "pulsar", "--route", route, home=home, timeout=120)
    assert made.code == 0, made.stderr
    point_route_at(home / "nereus.toml", {"service_url": endpoint.service_url,
                                          "admin_url": endpoint.admin_url})

    with running_engine(home):
        applied = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay",
                             "1h", "--wait", home=home, timeout=60)
        assert applied.code == 0, applied.stdout + applied.stderr
        assert applied.json()["result"] == "APPLIED"
    listed = run_nereus("--json", "checkpoint", "list", f"{route}/0", home=home)
    assert listed.code == 0, listed.stderr
    assert listed.json()["checkpoints"] == []
    assert '"checkpoint_taken"' not in (home / "log" / "engine.log").read_text()
