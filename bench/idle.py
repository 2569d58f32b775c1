"""What an idle engine costs: CPU and memory with nothing scheduled, by shard count.

Usage::

    .venv/bin/python bench/idle.py [--shards 16 64 ...] [--seconds S] [--json] [--keep]

For each shard count, two engines run one after the other, each in a child process of
its own (so its RSS is its own) on a fresh home with one file-log route of that many
shards and nothing scheduled:

* **baseline**: shard loops that look every ``poll_interval_ms`` (5 ms) whatever they
  hold, and a block cache and memtables per database (``LoopSettings(idle_wait_s=0)``,
  ``EngineSettings(memory_mb=None)``): how the engine ran before issue 15;
* **engine**: the daemon's defaults: loops that rest until something can happen
  (``engine/shard/idle_wait.py``) and one memory budget for every database of the process
  (``[engine] memory_mb``, ``nereus/state/memory.py``).

Each child starts its engine, waits until every shard is ACTIVE and 3 s more, then
reports the CPU seconds its process used over ``--seconds`` (default 10) of wall time, as
a percentage of one core, and its RSS at the end. Printed beside the targets (issue 15):
16 idle shards at most 1 % of one core, 64 idle shards under 300 MB RSS.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from scratch import scratch_dir

TARGET_CPU_16 = 1.0  # % of one core, 16 idle shards
TARGET_RSS_64_MB = 300.0
SETTLE_S = 30.0  # how long a shard may take to become ACTIVE
WARM_UP_S = 3.0  # then the loops wind down to their rest before the window opens


class Figures(msgspec.Struct, frozen=True):
    shards: int
    variant: str  # baseline | engine
    cpu_percent: float
    rss_mb: float


# the child: one engine, measured from inside its own process ------------------------------
def child(home: Path, shards: int, variant: str, seconds: float) -> Figures:
    import dataclasses
    import resource

    from nereus.config import parse_config
    from nereus.engine.process.engine_settings import EngineSettings
    from nereus.engine.process.home_engine import Engine

    text = (f'[routes.default]\nlog = "file"\npartitions = {shards}\n\n'
            '[lanes.local]\ndestination = "file"\npath = "outbox/local.jsonl"\n')
    home.mkdir(parents=True)
    (home / "nereus.toml").write_text(text)
    settings = EngineSettings()
    if variant == "baseline":
        settings = dataclasses.replace(
            settings, memory_mb=None, loop=dataclasses.replace(settings.loop, idle_wait_s=0.0))
    engine = Engine(home, parse_config(text, source="bench"), settings=settings)
    engine.start()
    try:
        for loop in engine.shards.values():  # recovered and replicated its lane policy
            if not loop.wait_active(SETTLE_S):
                raise SystemExit(f"shard {loop.shard} did not become ACTIVE: {loop.error}")
        time.sleep(WARM_UP_S)  # the loops' back-off after activation, left out of the window
        used = resource.getrusage(resource.RUSAGE_SELF)
        started = time.monotonic()
        time.sleep(seconds)  # the measured window itself: wall time with nothing to do
        after = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - started
        cpu = (after.ru_utime + after.ru_stime) - (used.ru_utime + used.ru_stime)
        rss_kb = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text()
                      .splitlines() if line.startswith("VmRSS:"))
    finally:
        engine.stop()
    return Figures(shards, variant, round(100 * cpu / wall, 2), round(rss_kb / 1024, 1))


def measure(root: Path, shards: int, variant: str, seconds: float) -> Figures:
    """One engine in a child process (this file, ``--child``); its figures."""
    home = root / f"{variant}-{shards}"
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(home), str(shards), variant, str(seconds)],
        capture_output=True, text=True, check=False, timeout=seconds + 120)
    if done.returncode != 0:
        raise SystemExit(f"the {variant} engine with {shards} shards failed:\n{done.stderr}")
    return msgspec.json.decode(done.stdout.strip().splitlines()[-1], type=Figures)


def render(figures: list[Figures]) -> str:
    out = ["Nereus Delay idle engine: nothing scheduled, file log, CPU over the window and RSS",
           f"  {'shards':>6}  {'baseline cpu':>12}  {'engine cpu':>10}  {'ratio':>6}  "
           f"{'baseline rss':>12}  {'engine rss':>10}  {'ratio':>6}"]
    by = {(f.shards, f.variant): f for f in figures}
    for shards in sorted({f.shards for f in figures}):
        base, ours = by[(shards, "baseline")], by[(shards, "engine")]
        out.append(
            f"  {shards:>6}  {base.cpu_percent:>11.2f}%  {ours.cpu_percent:>9.2f}%  "
            f"{ours.cpu_percent / max(base.cpu_percent, 0.01):>6.3f}  "
            f"{base.rss_mb:>9.1f} MB  {ours.rss_mb:>7.1f} MB  "
            f"{ours.rss_mb / max(base.rss_mb, 0.1):>6.3f}")
    if (16, "engine") in by:
        cpu = by[(16, "engine")].cpu_percent
        out.append(f"  target: 16 idle shards <= {TARGET_CPU_16} % of a core: {cpu} % "
                   f"{'MET' if cpu <= TARGET_CPU_16 else 'MISSED'}")
    if (64, "engine") in by:
        rss = by[(64, "engine")].rss_mb
        out.append(f"  target: 64 idle shards < {TARGET_RSS_64_MB:.0f} MB RSS: {rss} MB "
                   f"{'MET' if rss < TARGET_RSS_64_MB else 'MISSED'}")
    return "\n".join(out)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        home, shards, variant, seconds = sys.argv[2:6]
        print(msgspec.json.encode(child(Path(home), int(shards), variant,
                                        float(seconds))).decode())
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    with scratch_dir("nereus-idle-", None, keep=args.keep) as root:
        figures = [measure(root, shards, variant, args.seconds)
                   for shards in args.shards for variant in ("baseline", "engine")]
    print(json.dumps([msgspec.to_builtins(f) for f in figures], indent=2) if args.json
          else render(figures))


if __name__ == "__main__":
    main()
