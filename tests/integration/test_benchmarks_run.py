"""The benchmarks still run end to end and report what their docstrings promise.

Small sizes and no timing assertions: the figures themselves are for people to read (see
the README's Benchmarks section); these tests only keep the scripts from rotting as the
code under them changes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _bench(script: str, *args: str) -> Any:
    """What ``bench/<script> ... --json`` printed (a report, or a list of them)."""
    result = subprocess.run([sys.executable, str(REPO / "bench" / script), *args, "--json"],
                            capture_output=True, text=True, timeout=300, check=False, cwd=REPO)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_apply_bench_reports_every_round_and_the_median(tmp_path: Path) -> None:
    """bench/apply.py applies every record in each round, reports each round's pair and
    details the median round; its temp directory is gone afterwards."""
    report = _bench("apply.py", "--records", "3000", "--batch", "500", "--rounds", "3",
                    "--dir", str(tmp_path))
    assert report["ours"]["check"] == {"records_applied": 3000, "applied_position": 2999,
                                       "rejects": 0, "messages": 3000}
    ratios = sorted(one["ratio"] for one in report["rounds"])
    assert len(ratios) == 3
    assert report["ratio"] == ratios[1] and report["ratio_min"] == ratios[0]
    assert report["targets"]["ratio_met_every_round"] == (ratios[0] >= 0.3)
    assert report["ours"]["keys_per_record_apply"] == 3.0  # result, message, timeline entry
    assert list(tmp_path.iterdir()) == []


def test_lsm_backlog_bench_fills_two_databases_per_trigger() -> None:
    """bench/lsm_backlog.py fills two databases at once for the baseline trigger (4) and
    each one asked for, and reports each fill's time and first and last tenth."""
    report = _bench("lsm_backlog.py", "--commands", "20000", "--triggers", "16")
    assert set(report) == {"4", "16"}
    for fills in report.values():
        assert len(fills) == 2
        for fill in fills:
            assert fill["wall_s"] >= fill["first_tenth_s"] > 0 and fill["last_tenth_s"] > 0


def test_lsm_backlog_bench_compares_bloom_bits_and_counts_filter_probes() -> None:
    """With --bloom-bits, bench/lsm_backlog.py fills two databases for the usual 10 bits
    and each size asked for, and reports RocksDB's own counts of filter probes and false
    positives: every read of the bench misses, so none is a true positive."""
    report = _bench("lsm_backlog.py", "--commands", "60000", "--bloom-bits", "16")
    assert set(report) == {"bits-10", "bits-16"}
    for fills in report.values():
        assert len(fills) == 2
        for fill in fills:
            assert fill["filter_probes"] > 0
            assert 0 <= fill["filter_false_positives"] < fill["filter_probes"]
            assert fill["first_tenth_cpu_s"] > 0 and fill["last_tenth_cpu_s"] > 0


def test_lsm_backlog_bench_refuses_a_list_that_is_not_whole_numbers() -> None:
    """A bad --bloom-bits or --triggers is a usage error naming the option and the value,
    before any database is filled."""
    for option, value in (("--bloom-bits", "10,x"), ("--triggers", "0")):
        result = subprocess.run([sys.executable, str(REPO / "bench" / "lsm_backlog.py"),
                                 option, value], capture_output=True, text=True, timeout=60,
                                check=False, cwd=REPO)
        assert result.returncode == 2, result.stderr
        assert f"argument {option}: '{value}': give whole numbers" in result.stderr
        assert result.stdout == ""


def test_verify_bench_times_inspect_and_verify(tmp_path: Path) -> None:
    """bench/verify.py builds its shard, checkpoints it and times inspect and verify."""
    report = _bench("verify.py", "--messages", "2000", "--batch", "500", "--repeat", "1",
                    "--cache-dir", str(tmp_path))
    assert report["messages"] == 2000
    assert report["verify"]["replicated_pairs"] >= 3 * 2000  # message, timeline, result each
    assert report["verify"]["verify"]["seconds"] > 0
    assert report["inspect"]["wall_s"] > 0 and report["inspect"]["piped_wall_s"] > 0
    assert {"inspect", "verify", "targets"} <= set(report)


def test_fire_bench_runs_the_daemon_with_two_worker_processes() -> None:
    """bench/fire.py --workers 2 starts the daemon with two worker processes, spreads the
    load over more than one shard, and sees every message published once, by burst and by
    steady rate; its temp homes are gone afterwards."""
    import tempfile

    # a short directory: the admin sockets' paths must fit in AF_UNIX's 108 bytes
    with tempfile.TemporaryDirectory(prefix="nf-", dir="/tmp") as short:
        tmp_path = Path(short)
        report = _bench("fire.py", "--workers", "2", "--burst", "400", "--rate", "200",
                        "--duration", "2", "--lead-ms", "3000", "--dir", short)
        assert list(tmp_path.iterdir()) == []
    assert report["workers"] == 2 and report["partitions"] == 2
    burst, steady = report["burst"], report["steady"]
    assert burst["outbox_lines"] == 400 and burst["duplicates"] == 0
    assert len(burst["per_shard"]) == 2
    assert steady["outbox_lines"] == 400 and steady["states"] == {"PUBLISHED": 400}


def test_scale_bench_fills_herds_idles_and_sweeps() -> None:
    """bench/scale.py at a small size: every message it queued is pending and counted, the
    herd and the steady lane are published once and none early, an idle engine reports its
    figures, and the retention lane's published messages are swept with the replay equal
    to the live state; its temp homes are gone afterwards."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ns-", dir="/tmp") as short:
        report = _bench("scale.py", "--pending", "20000", "--herd", "3000", "--rate", "100",
                        "--idle-shards", "4", "--idle-seconds", "1",
                        "--retention-messages", "40", "--dir", short)
        assert list(Path(short).iterdir()) == []
    fill, herd = report["fill"], report["herd"]
    assert fill["pending"] == fill["scheduled_counted"] == 20_000
    assert fill["apply_first_tenth_per_s"] > 0 and fill["apply_last_tenth_per_s"] > 0
    assert fill["disk_bytes_per_pending"] > 0 and fill["inspect_s"] > 0
    full = fill["memory_full_mb"]  # the engine's memory gauges, summed over its processes
    assert full["store_memory_budget"] == 256.0  # MiB, [engine] memory_mb
    assert 0 < full["store_block_cache"] <= full["store_memory_budget"]
    assert full["resident_memory"] > full["store_table_readers"] >= 0
    assert herd["herd"] == 3000 and herd["b_during_drain"] > 0
    assert herd["early_a"] == herd["early_b"] == herd["duplicates"] == 0
    assert 1 <= len(herd["b_p99_by_tenth_ms"]) <= 10 and herd["held_back_ms"] >= 0
    # every b message admitted is in the engine's histograms of lane b, with a mean
    stages = herd["b_stages"]
    for stage in (stages["decided_after_action_at"], stages["admission_to_outcome"]):
        assert stage["count"] >= herd["b_during_drain"] and stage["mean_ms"] >= 0
    assert [idle["shards"] for idle in report["idle"]] == [4]
    kept = report["retention"]
    assert kept["published"] == 40
    assert kept["terminal_left"] == kept["attempts_left"] == 0
    assert kept["replay_matches"] is True


def test_sigterm_bench_counts_the_sigterms_a_busy_daemon_acted_on() -> None:
    """bench/sigterm.py starts the daemon, keeps its admin socket busy and sends SIGTERM:
    this tree's daemon acts on every one, and the bench says how long each exit took."""
    (tree,) = _bench("sigterm.py", "--trials", "2")
    assert tree["tree"] == "this tree" and tree["trials"] == 2
    assert Path(tree["package"]).resolve() == (REPO / "nereus").resolve()
    assert tree["not_acted_on"] == 0
    assert 0 < tree["exit_p50_s"] <= tree["exit_max_s"]


def test_hung_lanes_bench_reports_each_variant_beside_n_hung_lanes() -> None:
    """bench/hung_lanes.py runs an engine per N and variant: with reserves the healthy lane
    publishes every message beside two hung lanes, and the engine starts within seconds."""
    report = _bench("hung_lanes.py", "--hung", "0", "2", "--messages", "20")
    assert [(f["hung"], f["variant"]) for f in report] == [
        (0, "reserved"), (0, "shared"), (2, "reserved"), (2, "shared")]
    for figures in report:
        assert figures["start_s"] < 10
        if figures["variant"] == "reserved":
            assert figures["published"] == figures["messages"] == 20


def test_chaos_bench_runs_a_nemesis_and_reports_its_row(tmp_path: Path) -> None:
    """bench/chaos.py runs the workload under SIGKILL on the file default and reports the
    row (operations, faults, violations, lateness p99) with the history it checked."""
    report = _bench("chaos.py", "--ops", "12", "--duration", "3", "--nemesis", "sigkill",
                    "--dir", str(tmp_path))
    (row,) = report["runs"]
    assert (row["backend"], row["nemesis"]) == ("file", "sigkill")
    assert row["operations"] >= 12 and row["faults"] >= 1 and row["violations"] == 0
    assert report["violations"] == [] and Path(row["history"]).is_file()


def test_evidence_bench_settles_every_attempt_and_leaves_nothing_uncertain_with_a_fence(
) -> None:
    """bench/evidence.py (small): one scan pass settles the half of the UNKNOWN attempts
    whose lines are in the outbox and the fence proves the other half absent, whatever the
    history before; after kill -9 a file lane with its fence leaves no attempt UNCERTAIN."""
    report = _bench("evidence.py", "--attempts", "400", "--history", "0", "2000", "--kill",
                    "1500", "--kinds", "file")
    for row in report["scan"]:
        assert row["scan_settled"] == 200 and row["fence_absent"] == 200
    after = [row for row in report["kill"] if row["variant"] == "after"]
    assert after and all(row["uncertain_after_recovery"] == 0 for row in after)
