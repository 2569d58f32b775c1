"""A rolling upgrade from release 0.1.0 with traffic, for minutes (issue 42).

Usage::

    .venv/bin/python bench/rolling_upgrade.py [--seed S] [--ops N] [--mixed SECONDS]
        [--duration SECONDS] [--coordinator etcd|oxia] [--dir DIR] [--json]

Builds 0.1.0 from its commit (``docs/releases.toml``), starts three 0.1.0 nodes sharing four
shards (the chaos cluster: the coordinator, the Command Topic and every lane on Kafka), runs
the seeded chaos workload (N operations over the duration), and replaces the nodes one at
a time with the current build, ``--mixed`` seconds apart (both builds live meanwhile); then
``nereus upgrade finalize`` raises the cluster's level (the new nodes claim the test-only
level), and a 0.1.0 node and a level-1 node of the current build are started and must be
refused. Then quiescence, the final state, the replay digests and the chaos checker
(``tests/upgrade/rolling.py``). Prints: operations, mixed-version time, lost (acknowledged
commands not applied), early, duplicates per attempt, other violations, every shard
ACTIVE at the end, and what refused the old nodes. The history stays under ``--dir`` for
``python -m tests.chaos.checker HISTORY``. Exit status 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the chaos instrument and the upgrade tests live with the tests

from tests.chaos.homes import Brokers  # noqa: E402
from tests.upgrade.release_build import build_release, release  # noqa: E402
from tests.upgrade.rolling import rolling_upgrade  # noqa: E402

NAMED = {"lost": "acknowledged_commands_applied", "early": "never_early",
         "duplicates": "one_publish_per_attempt"}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ops", type=int, default=400)
    parser.add_argument("--mixed", type=float, default=60.0,
                        help="seconds between two node replacements (default 60)")
    parser.add_argument("--duration", type=float, default=None,
                        help="workload seconds (default: 2 x --mixed + 90)")
    parser.add_argument("--coordinator", choices=("etcd", "oxia"), default="etcd")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def brokers() -> Brokers:
    """Kafka from ``scripts/services`` (started if need be)."""
    from tests.integration.services import bring_up

    settings, _, problem = bring_up("kafka")
    if settings is None:
        raise SystemExit(f"kafka: {problem}")
    return Brokers(kafka=settings["NEREUS_KAFKA_BOOTSTRAP"])


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="nereus-rolling-"))
    duration = args.duration if args.duration is not None else 2 * args.mixed + 90
    started = time.monotonic()
    build = build_release(release("0.1.0"), root / "release")
    report, upgrade = rolling_upgrade(root / "run", brokers(), build, seed=args.seed,
                                      ops=args.ops, duration_s=duration,
                                      mixed_s=args.mixed, coordinator=args.coordinator)
    by_name = Counter(v.invariant for v in report.violations)
    mixed_ms = (upgrade.mixed_ended_ms or 0) - (upgrade.mixed_started_ms or 0)
    row = {"operations": report.operations, "faults": report.faults, "seen": report.seen,
           "mixed_version_s": round(mixed_ms / 1000, 1),
           **{name: by_name.pop(invariant, 0) for name, invariant in NAMED.items()},
           "other_violations": sum(by_name.values()), "quiesced": report.quiesced,
           "lateness_p99_ms": report.lateness_p99_ms, "refusals": upgrade.refusals,
           "history": report.history, "wall_s": round(time.monotonic() - started, 1)}
    if args.json:
        print(json.dumps(row))
    else:
        print(report.summary())
        print(" ".join(f"{k}={v}" for k, v in row.items() if k not in ("refusals", "history")))
        for who, said in upgrade.refusals.items():
            print(f"  {who}: {said}")
    return 1 if report.violations or not upgrade.done else 0


if __name__ == "__main__":
    sys.exit(main())
