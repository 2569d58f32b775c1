"""Failover and planned-move time of a cluster, with N messages pending on the moved shard.

Usage::

    .venv/bin/python bench/failover.py [--pending N ...] [--coordinator URL ...]
        [--mode standby|cold ...] [--ttl-ms T] [--deadline S] [--json] [--keep]

Real services (``scripts/services up kafka s3 etcd oxia``; started if not running, and left
running): two node daemons on one machine (``python -m nereus.engine.hosting.daemon``), their
Command Topic and Kafka destination lane, checkpoints in S3, the coordinator in etcd, or in
each coordinator ``--coordinator`` names (``etcd``, ``oxia``: the one of
``scripts/services``; ``etcd://HOST:PORT``, ``oxia://HOST:PORT``: another server), one
column each, side by side; the homes and the cluster's record are written by
``tests/integration/cluster_homes.py`` (the harness the cluster tests use). For each
coordinator and each N, a fresh cluster of two shards, one per node:

1. N SCHEDULE commands due in an hour are queued straight to the Command Topic on shard X
   (owned by n1); the bench waits until n1 applied them all;
2. a probe stream (20/s on X, each due at once) runs from then on, so "first publish" can
   be seen on the destination topic;
3. **planned move**: a pinned placement of X on n2 is written; reported: until X's owner
   record on n2 says ACTIVE, and until the first destination record of X produced after
   that (the old owner let go first, so it is the new owner's; the 20 ms polling of the
   owner record is the error bound); and the **handover gap**: from the last moment n1
   held X ACTIVE to n2 ACTIVE. n1 keeps publishing while n2 warms its copy of X, and lets
   it go only once n2 says the copy is warm, so for a large shard the move takes as long as
   the warm-up and the gap stays that of a small one;
4. n1 is stopped, its local state of X deleted and n1 started again, so it holds no copy
   of X, as a node that never held X; with ``--mode standby`` (the default:
   ``[cluster] standby``) n1 stands by for X and warms a copy of its own (restored from S3,
   then tailing the log) while n2 owns it, and the bench waits until it is warm; with
   ``--mode cold`` (``standby = false``, the behaviour before) it does not;
5. **failover**: n2 is SIGKILLed; reported: until X is ACTIVE on n1, and until the first
   destination record of X produced after the kill (the dead node produces nothing); and
   from n1's engine log, whether its activation restored a checkpoint and how many records
   it replayed.

Printed beside the session TTL. Targets (issue 14): failover <= TTL + 5 s at 100k pending,
planned move <= 3 s at 100k pending, held against the handover gap: the move the issue
describes (the owner stops claiming, waits for its outcomes, checkpoints and releases; the
target activates), which is when the shard publishes nothing. The warm-up before it, while
the old owner still publishes, is in the whole time printed beside it. Filling 1M pending
takes minutes on one machine (the log, then n1's apply); ``--deadline`` bounds each wait,
and a size that cannot be filled in time is reported as such.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the cluster harness of the tests

from nereus.cluster.records import OwnerState, Placement  # noqa: E402
from nereus.layout import HomeLayout  # noqa: E402
from nereus.shard import ShardId  # noqa: E402
from scratch import scratch_dir  # noqa: E402
from tests.daemon import owned_processes  # noqa: E402
from tests.integration.cluster_homes import (  # noqa: E402
    LANE,
    Cluster,
    ClusterSpec,
    make_cluster,
)
from tests.integration.kafka_topic import read_topic  # noqa: E402
from tests.integration.services import S3Endpoint, bring_up  # noqa: E402

TARGET_FAILOVER_EXTRA_S = 5.0
TARGET_MOVE_S = 3.0
TARGET_AT_PENDING = 100_000
PROBE_PER_S = 20


class Round(msgspec.Struct, frozen=True):
    """One N on one coordinator: how long each handover took (None: not reached in time)."""

    pending: int
    fill_s: float | None
    move_active_s: float | None = None
    move_first_publish_s: float | None = None
    # the handover itself: from the last moment n1 held the shard ACTIVE to n2 ACTIVE (the
    # warm-up before it runs while n1 still publishes)
    move_gap_s: float | None = None
    failover_active_s: float | None = None
    failover_first_publish_s: float | None = None
    failover_restored: bool | None = None  # the activation restored a checkpoint
    failover_replayed: int | None = None  # records its replay applied
    # from n1's shard_taken to its shard_active (restore, replay, barrier): the part of the
    # failover that can grow with the shard; the rest is the session TTL's
    failover_activation_s: float | None = None
    note: str = ""


class Column(msgspec.Struct, frozen=True):
    """Every N on one coordinator (``etcd``, ``oxia``: its kind; ``endpoint``: its server)."""

    coordinator: str
    endpoint: str
    rounds: list[Round]
    mode: str = "standby"  # standby: n1 keeps a warm copy of X; cold: it does not


class Report(msgspec.Struct, frozen=True):
    session_ttl_s: float
    columns: list[Column]
    failover_target_s: float
    move_target_s: float
    failover_met: bool | None
    move_met: bool | None


def _ids_on(cluster: Cluster, shard: ShardId, count: int, prefix: str) -> list[str]:
    route = cluster.spec.route
    out: list[str] = []
    n = 0
    while len(out) < count:
        m = f"{prefix}{n:08d}"
        n += 1
        if route.shard_for(m) == shard:
            out.append(m)
    return out


def _queue(cluster: Cluster, ids: list[str], deliver_at_ms: int) -> None:
    from nereus.client import prepare_schedule, queue

    with cluster.spec.logs() as logs:
        for start in range(0, len(ids), 5_000):
            queue([prepare_schedule(cluster.spec.route, command_id=f"s-{m}",
                                    delay_message_id=m, lane=LANE,
                                    deliver_at_ms=deliver_at_ms, payload=b"p")
                   for m in ids[start:start + 5_000]], logs)


def _applied(cluster: Cluster, node: str, shard: ShardId) -> int:
    from nereus.errors import NereusError

    try:
        status = cluster.nodes[node].admin.get("/v1/status")
    except NereusError:
        return -1
    for s in status["shards"]:
        if s["shard"] == str(shard):
            return int(s["applied_position"] or -1) if s["lag"] == 0 else -1
    return -1


def _wait(what: str, condition: object, deadline_s: float) -> float | None:
    """Poll until ``condition()`` holds; the monotonic instant, or None after the deadline."""
    assert callable(condition)
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            print(f"  {what}: not within {deadline_s} s", file=sys.stderr)
            return None
        time.sleep(0.02)
    return time.monotonic()


class Probe:
    """PROBE_PER_S messages on one shard, each due when queued, from a thread of its own."""

    def __init__(self, cluster: Cluster, shard: ShardId) -> None:
        self._cluster, self._shard = cluster, shard
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._body, daemon=True)

    def _body(self) -> None:
        n = 0
        while not self._stop.wait(1 / PROBE_PER_S):
            ids = _ids_on(self._cluster, self._shard, 1, f"probe-{n}-")
            n += 1
            try:
                _queue(self._cluster, ids, int(time.time() * 1000))
            except Exception as exc:  # a broker hiccup: the next one goes
                print(f"  probe: {exc}", file=sys.stderr)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


def _first_publish_after(cluster: Cluster, shard: ShardId, after_ms: int,
                         deadline_s: float) -> int | None:
    """The broker timestamp of the first record of ``shard`` produced after ``after_ms``."""
    end = time.monotonic() + deadline_s
    route = cluster.spec.route
    while time.monotonic() < end:
        stamps = [r.timestamp_ms for r in read_topic(cluster.spec.bootstrap, cluster.spec.topic)
                  if r.timestamp_ms > after_ms and route.shard_for(r.delay_message_id) == shard]
        if stamps:
            return min(stamps)
        time.sleep(0.2)
    return None


def one_round(root: Path, spec: ClusterSpec, pending: int, deadline_s: float) -> Round:
    """Steps 1-5 of the module's docstring for one N."""
    with owned_processes() as owned, make_cluster(root, spec, ["n1", "n2"], owned) as cluster:
        for node in ("n1", "n2"):
            cluster.start(node)
        cluster.wait_all_active(60)
        if _wait("each node owning a shard",
                 lambda: set(cluster.active_owners().values()) == {"n1", "n2"}, 30) is None:
            return Round(pending, None, note="the shards did not spread")
        shard = next(s for s, n in cluster.active_owners().items() if n == "n1")
        started = time.monotonic()
        ids = _ids_on(cluster, shard, pending, "pending-")
        _queue(cluster, ids, int(time.time() * 1000) + 3_600_000)
        with spec.logs() as logs:
            end = logs(shard).end_position()
        if _wait(f"n1 applying {pending:,} pending", lambda: _applied(
                cluster, "n1", shard) >= end - 1, deadline_s) is None:
            cluster.stop_all()
            return Round(pending, None, note=f"not filled within {deadline_s} s")
        fill_s = round(time.monotonic() - started, 1)
        with Probe(cluster, shard):
            time.sleep(2)
            _, version = cluster.store.placements()[shard]
            moved_ms, moved = int(time.time() * 1000), time.monotonic()
            cluster.store.place(shard, Placement(shard=str(shard), node_id="n2",
                                                 reason="bench move", pinned=True,
                                                 operator="bench", since_ms=moved_ms),
                                expected=version)
            held = _Held(cluster, shard, "n1")
            active = _wait("the move", lambda: held.look() and _owner_is(cluster, shard, "n2"),
                           deadline_s)
            active_ms = int(time.time() * 1000)
            gap = None if active is None else round(active - held.last, 2)
            first = _first_publish_after(cluster, shard, active_ms - 20, deadline_s)
            move_active = None if active is None else round(active - moved, 2)
            move_first = None if first is None else round((first - moved_ms) / 1000, 2)
            events = _restart_without(cluster, shard, deadline_s, warm=spec.standby)
            time.sleep(2)
            killed_ms, killed = int(time.time() * 1000), time.monotonic()
            cluster.nodes["n2"].kill()
            active = _wait("the failover", lambda: _owner_is(cluster, shard, "n1"), deadline_s)
            first = _first_publish_after(cluster, shard, killed_ms, deadline_s)
        cluster.stop_all()
        return Round(pending, fill_s, move_active, move_first, gap,
                     None if active is None else round(active - killed, 2),
                     None if first is None else round((first - killed_ms) / 1000, 2),
                     *activation(events.read(), shard))


class _Events:
    """The lines of a node's engine log written since this was made."""

    def __init__(self, home: Path) -> None:
        self._path = HomeLayout(home).logs / "engine.log"
        self._offset = self._path.stat().st_size if self._path.exists() else 0

    def read(self) -> list[dict[str, object]]:
        with open(self._path, "rb") as f:
            f.seek(self._offset)
            lines = f.read().decode(errors="replace").splitlines()
        found: list[dict[str, object]] = []
        for line in lines:
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
        return found


def _restart_without(cluster: Cluster, shard: ShardId, deadline_s: float, *,
                     warm: bool) -> _Events:
    """Step 4: n1 stopped, its copy of ``shard`` deleted, started again; with ``warm``,
    until it says its standby copy is warm. n1's engine log from then on."""
    cluster.nodes["n1"].stop()
    shutil.rmtree(HomeLayout(cluster.home("n1")).shard_state(shard), ignore_errors=True)
    events = _Events(cluster.home("n1"))
    cluster.start("n1")
    _wait("n1 back with a shard of its own",
          lambda: set(cluster.active_owners().values()) == {"n1", "n2"}, deadline_s)
    if warm:
        _wait("n1's standby copy warm", lambda: any(
            e.get("event") == "shard_warm" and e.get("shard") == str(shard)
            and e.get("standby") for e in events.read()), deadline_s)
    return events


def activation(events: list[dict[str, object]],
               shard: ShardId) -> tuple[bool, int | None, float | None]:
    """Of n1's last activation of ``shard``: whether it restored a checkpoint, how many
    records its replay applied, and the seconds from ``shard_taken`` to ``shard_active``."""
    mine = [e for e in events if e.get("shard") == str(shard)]
    taken = max((n for n, e in enumerate(mine) if e.get("event") == "shard_taken"), default=0)
    after = mine[taken:]
    active = [e for e in after if e.get("event") == "shard_active"]
    replayed = active[-1].get("replayed") if active else None
    took = None
    if active and after and after[0].get("event") == "shard_taken":
        took = round(_stamp(active[-1]) - _stamp(after[0]), 2)
    return (any(e.get("event") == "state_restored" for e in after),
            replayed if isinstance(replayed, int) else None, took)


def _stamp(event: dict[str, object]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()


class _Held:
    """When ``node`` was last seen holding the shard ACTIVE (its ``look`` polls once)."""

    def __init__(self, cluster: Cluster, shard: ShardId, node: str) -> None:
        self._cluster, self._shard, self._node = cluster, shard, node
        self.last = time.monotonic()

    def look(self) -> bool:
        if _owner_is(self._cluster, self._shard, self._node):
            self.last = time.monotonic()
        return True


def _owner_is(cluster: Cluster, shard: ShardId, node: str) -> bool:
    record = cluster.owners().get(shard)
    return record is not None and record.node_id == node and \
        record.state == OwnerState.ACTIVE


def _services(kinds: set[str]) -> tuple[str, S3Endpoint, dict[str, str]]:
    """Kafka, S3 and the coordinators ``kinds`` (etcd, oxia) of ``scripts/services``: the
    bootstrap address, S3, and each coordinator's HOST:PORT."""
    settings: dict[str, str] = {}
    for service in ("s3", "kafka", *sorted(kinds)):
        found, _, problem = bring_up(service)
        if found is None:
            raise SystemExit(f"{service}: {problem}")
        settings = found
    s3 = S3Endpoint(settings["NEREUS_S3_ENDPOINT"], settings["NEREUS_S3_ACCESS_KEY"],
                    settings["NEREUS_S3_SECRET_KEY"], settings.get("NEREUS_S3_REGION",
                                                                   "us-east-1"))
    endpoints = {"etcd": settings.get("NEREUS_ETCD_ENDPOINT", "").removeprefix("http://"),
                 "oxia": settings.get("NEREUS_OXIA_ENDPOINT", "")}
    return settings["NEREUS_KAFKA_BOOTSTRAP"], s3, {k: endpoints[k] for k in kinds}


def coordinator_arg(text: str) -> tuple[str, str | None]:
    """``--coordinator``: ``etcd`` or ``oxia`` (the server of ``scripts/services``), or
    ``etcd://HOST:PORT`` / ``oxia://HOST:PORT[/NAMESPACE]`` (another one); (kind, endpoint)."""
    kind, sep, rest = text.partition("://")
    if kind not in ("etcd", "oxia"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: write etcd, oxia, etcd://HOST:PORT or oxia://HOST:PORT[/NAMESPACE]")
    if not sep:
        return kind, None
    host, colon, port = rest.split("/", 1)[0].rpartition(":")
    if not rest or not host or not colon or not port.isdigit() or \
            (kind == "etcd" and "/" in rest.rstrip("/")):
        raise argparse.ArgumentTypeError(
            f"{text!r}: write {kind}://HOST:PORT" + ("[/NAMESPACE]" if kind == "oxia" else ""))
    return kind, rest.rstrip("/")


def spec_for(kind: str, endpoint: str, *, bootstrap: str, s3: S3Endpoint,
             ttl_ms: int, standby: bool = True) -> ClusterSpec:
    """A fresh two-shard cluster on ``endpoint`` (``kind``'s HOST:PORT[/NAMESPACE])."""
    return ClusterSpec(run=uuid.uuid4().hex[:10], bootstrap=bootstrap, etcd=endpoint, s3=s3,
                       oxia=endpoint if kind == "oxia" else None, partitions=2,
                       session_ttl_ms=ttl_ms, lease_margin_ms=min(2_000, ttl_ms // 4),
                       standby=standby)


def render(report: Report) -> str:
    ttl = report.session_ttl_s
    names = sorted({f"{c.coordinator} ({c.endpoint})" for c in report.columns})
    out = [f"Nereus Delay failover bench: 2 nodes, 2 shards, Kafka + S3 + "
           f"{' / '.join(names)}; session TTL {ttl} s"]
    for column in report.columns:
        out.append(f" {column.coordinator} at {column.endpoint}, {column.mode}:")
        for r in column.rounds:
            out.append(f"  pending {r.pending:>9,}: filled in {r.fill_s} s; planned move ACTIVE "
                       f"{r.move_active_s} s (handover gap {r.move_gap_s} s), first publish "
                       f"{r.move_first_publish_s} s; SIGKILL "
                       f"-> ACTIVE {r.failover_active_s} s, first publish "
                       f"{r.failover_first_publish_s} s (TTL {ttl} s; restored a checkpoint: "
                       f"{r.failover_restored}, replayed {r.failover_replayed}, taken -> "
                       f"ACTIVE {r.failover_activation_s} s) {r.note}")
    out += ["", side_by_side(report)]
    out.append(f"  targets at {TARGET_AT_PENDING:,} pending: failover <= {report.failover_target_s}"
               f" s: {_met(report.failover_met)}; planned move (handover gap) <= "
               f"{report.move_target_s} s: "
               f"{_met(report.move_met)}")
    return "\n".join(out)


def side_by_side(report: Report) -> str:
    """The table of bench/README.md: one row per N, per coordinator the handover gap of the
    planned move and SIGKILL -> first publish."""
    head = "| pending |" + "".join(f" {c.coordinator} {c.mode}: handover gap | "
                                   f"{c.coordinator} {c.mode}: SIGKILL -> first publish |"
                                   for c in report.columns)
    rule = "|---:|" + "---:|---:|" * len(report.columns)
    pendings = sorted({r.pending for c in report.columns for r in c.rounds})
    rows = []
    for pending in pendings:
        cells = []
        for column in report.columns:
            found = [r for r in column.rounds if r.pending == pending]
            r = found[0] if found else None
            cells += [_s(None if r is None else r.move_gap_s),
                      _s(None if r is None else r.failover_first_publish_s)]
        rows.append(f"| {pending:,} | " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *rows])


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _met(value: bool | None) -> str:
    return "not measured" if value is None else "MET" if value else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, nargs="+", default=[0, 100_000, 1_000_000])
    parser.add_argument("--coordinator", type=coordinator_arg, action="append", metavar="URL",
                        help="etcd, oxia, etcd://HOST:PORT or oxia://HOST:PORT[/NAMESPACE]; "
                             "again for another column (default: etcd)")
    parser.add_argument("--mode", choices=["standby", "cold"], action="append",
                        help="standby: n1 keeps a warm copy of the shard (the default); "
                             "cold: it does not (standby = false); again for another column")
    parser.add_argument("--ttl-ms", type=int, default=10_000, help="the session TTL")
    parser.add_argument("--deadline", type=float, default=240.0, help="seconds per wait")
    parser.add_argument("--dir", type=Path, default=None, help="where the temp homes go")
    parser.add_argument("--keep", action="store_true", help="keep the temp homes")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args()
    wanted: list[tuple[str, str | None]] = args.coordinator or [("etcd", None)]
    bootstrap, s3, served = _services({kind for kind, endpoint in wanted if endpoint is None})
    columns = []
    modes: list[str] = args.mode or ["standby"]
    with scratch_dir("nereus-failover-", args.dir, keep=args.keep) as root:
        for n, (kind, given) in enumerate(wanted):
            endpoint = given or served[kind]
            by_mode: dict[str, list[Round]] = {mode: [] for mode in modes}
            for pending in args.pending:  # the modes alternate, so each N is side by side
                for mode in modes:
                    spec = spec_for(kind, endpoint, bootstrap=bootstrap, s3=s3,
                                    ttl_ms=args.ttl_ms, standby=mode == "standby")
                    by_mode[mode].append(one_round(root / f"{kind}{n}-{mode}-p{pending}",
                                                   spec, pending, args.deadline))
                    print(f"  {kind} {mode} {by_mode[mode][-1]}", file=sys.stderr)
            columns += [Column(kind, endpoint, rounds, mode) for mode, rounds in by_mode.items()]
    at = [r for c in columns for r in c.rounds if r.pending == TARGET_AT_PENDING]
    ttl_s = args.ttl_ms / 1000
    failover_target = ttl_s + TARGET_FAILOVER_EXTRA_S
    report = Report(
        ttl_s, columns, failover_target, TARGET_MOVE_S,
        None if not at or any(r.failover_first_publish_s is None for r in at)
        else all(r.failover_first_publish_s <= failover_target for r in at
                 if r.failover_first_publish_s is not None),
        None if not at or any(r.move_gap_s is None for r in at)
        else all(r.move_gap_s <= TARGET_MOVE_S for r in at if r.move_gap_s is not None))
    print(json.dumps(msgspec.to_builtins(report), indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
