"""Randomized histories under faults, checked against the seeds' invariants (issue 37).

Usage::

    .venv/bin/python bench/chaos.py [--seed S] [--ops N] [--duration SECONDS]
        [--backend file|kafka|pulsar|cluster]... [--coordinator etcd|oxia]
        [--nemesis NAME|all]... [--dir DIR] [--cli-keys] [--json]

For each backend and each nemesis (``all``: every nemesis that applies to the backend),
one run of ``tests/chaos/runner.py``: a home on that backend, the seeded workload (N
operations over the duration: schedules over plain and ORDERED lanes, payloads of every
size including object-store ones, cancels and reschedules racing their due time, retries
of the same command, operator mutations, queries with and without the barrier), the
nemesis injected and healed over and over, quiescence, the final state of every shard and
the replay digests, then the checker. A line per run: operations, faults injected,
violations (want 0), lateness p99 (first read minus max(deliverAt, the schedule's invoke
time), every lane), whether the run quiesced, and its wall time. Each run's history stays
under ``--dir`` (default: a new temporary directory, printed) for ``python -m
tests.chaos.checker HISTORY`` to re-check; every violation is printed with the history
lines that prove it. Exit status 1 when any run found a violation.

The brokers are those ``scripts/services`` runs; one that is not running is started.
``kafka-outage``, ``pulsar-outage`` and ``s3-outage`` stop and start the shared server (with
``s3-outage`` the homes keep their objects in S3). ``full-disk``
mounts a tmpfs for the home (root only).

``--backend cluster``: three nodes on this host sharing four shards through the coordinator
(``--coordinator``: etcd at 127.0.0.1:2379, the default, or Oxia at 127.0.0.1:6648), the
Command Topic and every lane on Kafka, objects in a directory the nodes share (in S3 with
``s3-outage``); ``tests/chaos/cluster_runner.py``. There ``sigkill``, ``sigstop`` and
``restart`` act on one node drawn by the seed (``sigstop`` half the time past its session
TTL), ``shard-move`` is ``nereus shard move`` to another node, and ``coordinator-outage``
stops and starts the shared coordinator; the destination and clock nemeses reach every
node. A nemesis that does not apply to a backend is left out of its runs (said once).
After the runs, a table: nemesis x backend, each cell operations / faults / violations /
lateness p99.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the chaos instrument lives with the tests

import msgspec  # noqa: E402

from tests.chaos.cluster_runner import CLUSTER_NEMESES  # noqa: E402
from tests.chaos.homes import Brokers  # noqa: E402
from tests.chaos.runner import (  # noqa: E402
    CLUSTER_ONLY,
    NEMESES,
    WORKER_NEMESES,
    RunReport,
    RunSpec,
    run_chaos,
)

BACKENDS = ("file", "kafka", "pulsar", "cluster")
NOT_IN_ALL = {"s3-outage", "none"}  # asked by name only


def applies(backend: str, nemesis: str) -> bool:
    """Whether ``nemesis`` (``a+b``: each part) reaches ``backend``: a broker's outage only
    its own backend's (Kafka's a cluster's too), the cluster's own only a cluster, and a
    cluster none that needs one home (a file lane's path, a checkpoint restore, a full
    disk, a worker process)."""
    parts = nemesis.split("+")
    if backend == "cluster":
        return all(part in CLUSTER_NEMESES for part in parts)
    return all(part not in CLUSTER_ONLY
               and not (part.endswith("-outage") and part != "s3-outage"
                        and part != f"{backend}-outage")
               for part in parts)


def nemeses_for(backend: str, asked: list[str]) -> list[str]:
    """The nemeses to run on ``backend``: those asked that apply there, ``all`` expanded
    to every one that does (the worker nemeses on the file default only; ``s3-outage``
    and ``none`` asked by name only)."""
    names = asked
    if "all" in asked:
        names = [n for n in NEMESES if n not in NOT_IN_ALL
                 and not (n in WORKER_NEMESES and backend != "file")]
    return [n for n in dict.fromkeys(names) if applies(backend, n)]


def wants_s3(asked: list[str]) -> bool:
    return any("s3-outage" in name for name in asked)


def brokers_for(backends: list[str], s3: bool = False) -> Brokers:
    """The session's brokers for ``backends``, and S3 when asked (started with
    ``scripts/services`` if need be)."""
    from tests.integration.services import S3Endpoint, bring_up

    kafka = pulsar_url = pulsar_admin = None
    endpoint = None
    if s3:
        settings, _, problem = bring_up("s3")
        if settings is None:
            raise SystemExit(f"s3: {problem}")
        endpoint = S3Endpoint(endpoint_url=settings["NEREUS_S3_ENDPOINT"],
                              access_key_id=settings["NEREUS_S3_ACCESS_KEY"],
                              secret_access_key=settings["NEREUS_S3_SECRET_KEY"],
                              region=settings.get("NEREUS_S3_REGION", "us-east-1"))
    if "kafka" in backends or "cluster" in backends:
        settings, _, problem = bring_up("kafka")
        if settings is None:
            raise SystemExit(f"kafka: {problem}")
        kafka = settings["NEREUS_KAFKA_BOOTSTRAP"]
    if "pulsar" in backends:
        settings, _, problem = bring_up("pulsar")
        if settings is None:
            raise SystemExit(f"pulsar: {problem}")
        pulsar_url, pulsar_admin = settings["NEREUS_PULSAR_URL"], settings["NEREUS_PULSAR_HTTP_URL"]
    return Brokers(kafka=kafka, pulsar_url=pulsar_url, pulsar_admin=pulsar_admin, s3=endpoint)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/chaos.py", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of workload")
    parser.add_argument("--backend", action="append", choices=BACKENDS,
                        help="repeatable (default: file)")
    parser.add_argument("--coordinator", choices=("etcd", "oxia"), default="etcd",
                        help="the cluster backend's coordinator (default: etcd)")
    parser.add_argument("--nemesis", action="append", metavar="NAME",
                        help=f"repeatable, or all; a+b injects both at once ({', '.join(NEMESES)})")
    parser.add_argument("--dir", type=Path, default=None, help="where the runs' homes and "
                        "histories go (default: a new temporary directory)")
    parser.add_argument("--cli-keys", action="store_true", help="operator mutations with the "
                        "CLI's default idempotency key (derived from the content) instead "
                        "of one of their own")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    for name in args.nemesis or []:
        for part in name.split("+"):
            if part != "all" and part not in NEMESES:
                parser.error(f"argument --nemesis: no nemesis {part!r} "
                             f"(known: {', '.join(NEMESES)}, all)")
    if args.ops < 1 or args.duration <= 0:
        parser.error("--ops and --duration must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    backends = args.backend or ["file"]
    brokers = brokers_for(backends, s3=wants_s3(args.nemesis or []))
    base = args.dir or Path(tempfile.mkdtemp(prefix="nereus-chaos-"))
    rows: list[dict[str, object]] = []
    reports: list[RunReport] = []
    failed = False
    for backend in backends:
        left_out = [n for n in args.nemesis or [] if n != "all" and not applies(backend, n)]
        if left_out and not args.json:
            print(f"{backend}: {', '.join(left_out)} does not apply there: left out")
        for nemesis in nemeses_for(backend, args.nemesis or ["sigkill"]):
            spec = RunSpec(seed=args.seed, ops=args.ops, duration_s=args.duration,
                           backend=backend, nemeses=(nemesis,),
                           quiesce_s=max(60.0, args.duration * 2),
                           operator_keys="cli" if args.cli_keys else "own",
                           coordinator=args.coordinator)
            began = time.monotonic()
            try:
                report = run_chaos(spec, base / f"{backend}-{nemesis}-{args.seed}", brokers)
            except Exception as exc:  # a run that could not run: said, and the exit is 1
                failed = True
                rows.append({"backend": backend, "nemesis": nemesis,
                             "error": f"{type(exc).__name__}: {exc}"[:2_000],
                             "wall_s": round(time.monotonic() - began, 1)})
                if not args.json:
                    print(f"{backend:<7} {nemesis:<20} did not run: {rows[-1]['error']}",
                          flush=True)
                continue
            reports.append(report)
            rows.append({"backend": backend, "nemesis": nemesis,
                         "operations": report.operations, "faults": report.faults,
                         "violations": len(report.violations),
                         "lateness_p99_ms": report.lateness_p99_ms,
                         "quiesced": report.quiesced, "seen": report.seen,
                         "wall_s": round(time.monotonic() - began, 1),
                         "history": report.history})
            if not args.json:
                print(_row(rows[-1]), flush=True)
                for violation in report.violations[:10]:
                    print("  " + violation.render().replace("\n", "\n  "))
                for note in report.notes:
                    print(f"  note: {note}")
    if args.json:
        print(json.dumps({"seed": args.seed, "ops": args.ops, "duration_s": args.duration,
                          "coordinator": args.coordinator, "dir": str(base), "runs": rows,
                          "violations": [msgspec.to_builtins(v) for r in reports
                                         for v in r.violations]}, indent=2))
    else:
        print(f"histories under {base}\n")
        print(table(rows, backends))
    return 1 if failed or any(r.violations for r in reports) else 0


def _row(row: dict[str, object]) -> str:
    return (f"{row['backend']:<7} {row['nemesis']:<20} ops {row['operations']:>5}  "
            f"faults {row['faults']:>3}  violations {row['violations']:>3}  "
            f"lateness p99 {row['lateness_p99_ms']} ms  quiesced {row['quiesced']}  "
            f"{row['wall_s']} s")


def table(rows: list[dict[str, object]], backends: list[str]) -> str:
    """Nemesis x backend in Markdown, each cell ``operations / faults / violations /
    lateness p99 ms`` (``-``: not run there; ``error``: the run did not run)."""
    cells = {(str(r["nemesis"]), str(r["backend"])): r for r in rows}
    nemeses = list(dict.fromkeys(str(r["nemesis"]) for r in rows))
    lines = ["| nemesis | " + " | ".join(backends) + " |",
             "|---|" + "---|" * len(backends)]
    for nemesis in nemeses:
        out = []
        for backend in backends:
            row = cells.get((nemesis, backend))
            if row is None:
                out.append("-")
            elif "error" in row:
                out.append("error")
            else:
                p99 = row["lateness_p99_ms"]
                out.append(f"{row['operations']} / {row['faults']} / {row['violations']} / "
                           f"{'-' if p99 is None else p99}"
                           + ("" if row["quiesced"] else " (not quiet)"))
        lines.append(f"| {nemesis} | " + " | ".join(out) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
