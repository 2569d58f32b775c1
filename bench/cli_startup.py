"""Start-up cost of ``nereus --help`` beside a bare interpreter.

Usage::

    .venv/bin/python bench/cli_startup.py [--runs N] [--json]

What it does, in one run:

1. **wall time**: N runs (default 20) of the installed console script ``nereus --help``
   and N runs of ``python -c pass`` with the same interpreter, interleaved so both see the
   same machine state; median and p90 (nearest rank) of each, their ratio and the
   difference (what the CLI itself costs: imports and building the command tree).
2. **imports**: one ``nereus --help`` under ``python -X importtime``; the ten imports with
   the largest cumulative time (microseconds, as Python reports them; a package's
   cumulative time includes its submodules), and the heavy packages that must stay out
   (textual, boto3, confluent_kafka, pulsar, rocksdict) if any got imported.

Why: ``nereus --help`` and shell completion are what an operator feels on every command;
the CLI keeps heavy imports inside the commands that need them. Nothing here changes
product code.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from installed_cli import cli_environ

HEAVY = ("textual", "boto3", "confluent_kafka", "pulsar", "rocksdict")

# `nereus --help` exactly as the console script runs it, for -X importtime.
HELP_PROGRAM = (
    "import sys; sys.argv = ['nereus', '--help']\n"
    "from nereus.cli.main import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
)


def nereus_script() -> str:
    """The installed ``nereus`` next to this interpreter (as an operator runs it)."""
    found = shutil.which("nereus", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("no nereus console script beside this interpreter: run `make install`")
    return found


def timed(argv: list[str]) -> float:
    """Wall seconds of one run, output discarded; a failing run aborts the benchmark."""
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env=cli_environ())
    return time.perf_counter() - started


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


def summary(values: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(values) * 1000,
            "p90_ms": percentile(values, 0.9) * 1000,
            "min_ms": min(values) * 1000}


def import_profile() -> tuple[list[dict[str, Any]], list[str]]:
    """The ten heaviest imports (cumulative) of one ``nereus --help``, and heavy ones seen."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", HELP_PROGRAM],
                          capture_output=True, text=True, check=True)
    rows: list[dict[str, Any]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:"):].split("|")
        rows.append({"module": name.strip(), "self_us": int(self_us),
                     "cumulative_us": int(cumulative_us)})
    top = sorted(rows, key=lambda r: r["cumulative_us"], reverse=True)[:10]
    heavy = sorted({r["module"].split(".")[0] for r in rows} & set(HEAVY))
    return top, heavy


def run(runs: int) -> dict[str, Any]:
    nereus = [nereus_script(), "--help"]
    bare = [sys.executable, "-c", "pass"]
    timed(nereus), timed(bare)  # warm the page cache and .pyc files; not counted
    cli_times: list[float] = []
    bare_times: list[float] = []
    for _ in range(runs):
        cli_times.append(timed(nereus))
        bare_times.append(timed(bare))
    cli, python = summary(cli_times), summary(bare_times)
    top, heavy = import_profile()
    return {
        "runs": runs,
        "python": sys.version.split()[0],
        "nereus_help": cli,
        "python_pass": python,
        "ratio_median": cli["median_ms"] / python["median_ms"],
        "overhead_median_ms": cli["median_ms"] - python["median_ms"],
        "top_imports": top,
        "heavy_imported": heavy,
    }


def report(result: dict[str, Any]) -> None:
    print(f"{result['runs']} runs each, Python {result['python']}")
    for label, key in (("nereus --help", "nereus_help"), ("python -c pass", "python_pass")):
        times = result[key]
        print(f"  {label:<16} median {times['median_ms']:7.1f} ms   p90 "
              f"{times['p90_ms']:7.1f} ms   min {times['min_ms']:7.1f} ms")
    print(f"  ratio (median)   {result['ratio_median']:.2f}x; the CLI adds "
          f"{result['overhead_median_ms']:.1f} ms")
    print("heaviest imports of `nereus --help` (cumulative, -X importtime):")
    for row in result["top_imports"]:
        print(f"  {row['cumulative_us'] / 1000:7.1f} ms  (self {row['self_us'] / 1000:5.1f} ms)"
              f"  {row['module']}")
    heavy = result["heavy_imported"]
    print("heavy packages imported: " + (", ".join(heavy) if heavy else "none"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (20)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    result = run(args.runs)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)
    return 1 if result["heavy_imported"] else 0


if __name__ == "__main__":
    sys.exit(main())
