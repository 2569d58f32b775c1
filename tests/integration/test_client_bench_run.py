"""bench/client.py still runs end to end on Kafka (tiny sizes, no timing assertions: the
figures are bench/README.md's) and reports what its docstring promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.integration.kafka_service import kafka_bootstrap, kafka_service  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


def test_client_bench_reports_rates_their_ratio_and_latencies(
        kafka_bootstrap: str) -> None:  # noqa: F811
    """Both sides' rates, their ratio, and p50/p99 to QUEUED and to APPLIED each way."""
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "client.py"), "--messages", "400", "--rounds",
         "1", "--samples", "2", "--concurrency", "2", "--bootstrap", kafka_bootstrap,
         "--json"], capture_output=True, text=True, timeout=240, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["client"]["rate_per_s"] > 0 and report["raw_producer"]["rate_per_s"] > 0
    assert report["ratio"] == round(report["client"]["rate_per_s"]
                                    / report["raw_producer"]["rate_per_s"], 3)
    for name in ("queued_under_load", "queued_via_engine", "applied_via_engine",
                 "queued_via_log", "applied_via_log"):
        assert report[name]["p99_ms"] >= report[name]["p50_ms"] > 0, name
    assert report["applied_via_engine"]["samples"] == 2
