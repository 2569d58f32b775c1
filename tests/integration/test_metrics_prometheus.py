"""The engine's metrics as Prometheus sees them: a real Prometheus scrapes ``[metrics]
listen`` and every metric and every Grafana panel's query finds series through its HTTP
query API; ``promtool check metrics`` accepts ``nereus metrics``; with ``--workers 2`` the
front door's merged exposition counts each admission once; the alerting rules pass
``promtool check rules`` and their unit tests."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import run_nereus
from tests.daemon import stop_engine
from tests.integration.prometheus_server import ROOT, free_port, prometheus, tools_dir
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(240)

OPS = ROOT / "docs" / "ops"
MESSAGES = 6

# every family the exposition must carry once messages were published (the query name)
METRICS = (
    "nereus_commands_applied_total", "nereus_applied_position", "nereus_log_end_position",
    "nereus_command_topic_lag_records", "nereus_checkpoint_age_seconds", "nereus_shard_state",
    "nereus_fencing_epoch", "nereus_fencing_events_total", "nereus_unknown_attempts",
    "nereus_stale_admissions_total", "nereus_publish_outcomes_total",
    "nereus_due_lag_seconds_bucket", "nereus_due_lag_seconds_count",
    "nereus_admission_outcome_latency_seconds_bucket", "nereus_admissions_total",
    "nereus_claims_total", "nereus_claim_latency_seconds_bucket",
    "nereus_claim_revocations_total",  # from zero: a rate exists before the first revocation
    "nereus_messages", "nereus_pending_messages", "nereus_uncertain_messages",
    "nereus_due_messages", "nereus_lane_gate_open", "nereus_lane_ready",
    "nereus_due_lag_max_seconds", "nereus_worker_restarts_total",
    "nereus_trusted_time_held_back_seconds", "nereus_resident_memory_bytes",
    "nereus_store_memory_budget_bytes", "nereus_store_block_cache_bytes",
    "nereus_store_memtable_bytes", "nereus_store_table_readers_bytes",
    "nereus_payload_gc_rounds_total", "nereus_payload_gc_failures_total",
    "nereus_payload_gc_deleted_objects_total", "nereus_payload_gc_deleted_bytes_total",
    "nereus_payload_gc_last_success_timestamp_seconds",
)


@pytest.fixture(scope="module")
def prometheus_tools() -> Path:
    return tools_dir()


def nereus_json(home: Path, *args: str) -> Any:
    result = run_nereus("--json", *args, home=home, timeout=90)
    assert result.code == 0, f"nereus {' '.join(args)}: {result.stderr}"
    return result.json()


@pytest.fixture(params=[1, 2], ids=["one-process", "two-workers"])
def published_home(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A running engine (one process, or a front door and two workers) with ``[metrics]
    listen`` on a free port, after ``MESSAGES`` messages were published."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "2", home=home).code == 0
    port = free_port()
    with (home / "nereus.toml").open("a") as config:
        config.write(f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n')
    workers = str(request.param)
    nereus_json(home, "engine", "start", "--workers", workers, "--timeout", "60")
    try:
        batch = home / "batch.jsonl"
        batch.write_text("".join(json.dumps({"id": f"m-{i}", "lane": "local", "delay": "1s",
                                             "payload": f"p-{i}"}) + "\n"
                                 for i in range(MESSAGES)))
        nereus_json(home, "message", "schedule", "--batch", str(batch), "--wait")
        wait_until("every message PUBLISHED",
                   lambda: sum(m["state"] == "PUBLISHED" for m in nereus_json(
                       home, "message", "list", "--limit", "100")["messages"]) == MESSAGES, 60)
        yield home, port
    finally:
        stop_engine(home)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition by (name, labels); a sample twice fails."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in found, f"{key} appears twice in the exposition"
            found[key] = sample.value
    return found


def total(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float:
    return sum(value for (sample, keys), value in found.items()
               if sample == name and labels.items() <= dict(keys).items())


def dashboard_queries() -> list[str]:
    dashboard = json.loads((OPS / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_prometheus_scrapes_every_metric_and_every_dashboard_query_finds_series(
        published_home: tuple[Path, int], prometheus_tools: Path, tmp_path: Path) -> None:
    """`nereus metrics` passes `promtool check metrics` and counts each of the published
    messages once (one process or two workers); a real Prometheus scraping the listener
    then has series for every metric family and every panel query of the dashboard."""
    home, port = published_home
    result = run_nereus("metrics", home=home, timeout=60)
    assert result.code == 0, result.stderr
    checked = subprocess.run([str(prometheus_tools / "promtool"), "check", "metrics"],
                             input=result.stdout, capture_output=True, text=True, timeout=60,
                             check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    found = samples(result.stdout)
    assert total(found, "nereus_admissions_total", lane="local") == MESSAGES
    assert total(found, "nereus_publish_outcomes_total", lane="local",
                 outcome="PUBLISHED") == MESSAGES
    assert total(found, "nereus_due_lag_seconds_count", lane="local") == MESSAGES
    assert total(found, "nereus_messages", lane="local", state="PUBLISHED") == MESSAGES
    assert {dict(keys)["shard"] for (name, keys) in found
            if name == "nereus_applied_position"} == {"default/0", "default/1"}
    # the workers' shares of [engine] memory_mb (default 256) add up to the engine's budget
    assert total(found, "nereus_store_memory_budget_bytes") == 256 << 20
    assert total(found, "nereus_resident_memory_bytes") > 0
    assert {dict(keys)["shard"] for (name, keys) in found
            if name == "nereus_store_table_readers_bytes"} == {"default/0", "default/1"}
    document = nereus_json(home, "metrics")
    assert document["exposition"].startswith("# HELP ")

    with prometheus(prometheus_tools, tmp_path / "prom", f"127.0.0.1:{port}") as server:
        wait_until("Prometheus to scrape the engine", server.targets_up, 60)
        for name in METRICS:
            wait_until(f"series of {name} in Prometheus",
                       lambda name=name: server.query(name),  # type: ignore[misc]
                       30, interval_s=0.25)
        scraped = server.query('sum(nereus_admissions_total{lane="local"})')
        assert float(scraped[0]["value"][1]) == MESSAGES
        for expr in dashboard_queries():
            wait_until(f"series for the dashboard query {expr}",
                       lambda expr=expr: server.query(expr),  # type: ignore[misc]
                       30, interval_s=0.25)


def test_the_alerting_rules_pass_promtool_check_and_their_unit_tests(
        prometheus_tools: Path) -> None:
    """docs/ops/alerts.yml is valid, and each alert fires (and only then) in
    docs/ops/alerts.test.yml's scenarios."""
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts.test.yml"]):
        done = subprocess.run([str(prometheus_tools / "promtool"), *args], cwd=OPS,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}{done.stderr}"


def test_the_listener_serves_only_metrics_and_is_off_unless_configured(tmp_path: Path) -> None:
    """Without ``[metrics]`` no port is opened; with it, ``/metrics`` answers in the text
    format and any other path is 404."""
    import urllib.error
    import urllib.request

    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    port = free_port()
    started = nereus_json(home, "engine", "start", "--timeout", "60")
    try:
        assert started
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
    finally:
        stop_engine(home)
    with (home / "nereus.toml").open("a") as config:
        config.write(f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n')
    nereus_json(home, "engine", "start", "--timeout", "60")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert b"nereus_applied_position" in answer.read()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=10)
        assert missing.value.code == 404
    finally:
        stop_engine(home)


def test_payload_collection_metrics_only_where_a_process_collects(tmp_path: Path) -> None:
    """``[engine] payload_gc_interval = "0s"`` (collection off): `nereus metrics` carries
    no ``nereus_payload_gc_`` series; with the default (hourly) it carries all five, at
    zero rounds and no success yet."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    config = home / "nereus.toml"
    default = config.read_text()
    found: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for name, text in (("off", default + '\n[engine]\npayload_gc_interval = "0s"\n'),
                       ("default", default)):
        config.write_text(text)
        nereus_json(home, "engine", "start", "--timeout", "60")
        try:
            result = run_nereus("metrics", home=home, timeout=60)
            assert result.code == 0, result.stderr
            found[name] = samples(result.stdout)
        finally:
            stop_engine(home)
    assert not [key for key in found["off"] if key[0].startswith("nereus_payload_gc_")]
    collected = {key[0]: value for key, value in found["default"].items()
                 if key[0].startswith("nereus_payload_gc_")}
    assert collected == {"nereus_payload_gc_rounds_total": 0,
                         "nereus_payload_gc_failures_total": 0,
                         "nereus_payload_gc_deleted_objects_total": 0,
                         "nereus_payload_gc_deleted_bytes_total": 0,
                         "nereus_payload_gc_last_success_timestamp_seconds": 0}
