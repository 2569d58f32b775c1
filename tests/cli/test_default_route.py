"""A home with one route needs no --route, whatever that route is called; a home with
several and none named default says which to pick (issue 16, everyday comfort)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_nereus


def test_the_only_route_is_the_default_route(tmp_path: Path) -> None:
    """init --route orders, then schedule, cancel and reschedule without --route: each is
    queued on orders' shard."""
    home = tmp_path / "h"
    assert run_nereus("init", "--route", "orders", home=home).code == 0
    scheduled = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                           "--id", "o-1", "--payload", "x", home=home)
    assert scheduled.code == 0, scheduled.stderr
    assert scheduled.json()["shard"].startswith("orders/")
    cancelled = run_nereus("--json", "message", "cancel", "o-1", home=home)
    assert cancelled.code == 0, cancelled.stderr
    assert cancelled.json()["shard"] == scheduled.json()["shard"]


def test_several_routes_and_none_named_default_need_route(tmp_path: Path) -> None:
    """Two routes, a and b: schedule without --route exits 2 naming both and the flag;
    with --route b it is queued on b."""
    home = tmp_path / "h"
    assert run_nereus("init", "--route", "a", home=home).code == 0
    config = home / "nereus.toml"
    config.write_text(config.read_text() + '\n[routes.b]\nlog = "file"\npartitions = 1\n')
    refused = run_nereus("message", "schedule", "--lane", "local", "--delay", "1h",
                         "--payload", "x", home=home)
    assert refused.code == 2, refused.stderr
    assert "(a, b)" in refused.stderr and "--route" in refused.stderr
    chosen = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                        "--payload", "x", "--route", "b", home=home)
    assert chosen.code == 0, chosen.stderr
    assert chosen.json()["shard"] == "b/0"
