"""A cluster on a partitionable network (``tests/integration/netns.py``), its run recorded
as a chaos history (``history.py``) and judged by the checker (``checker.check``).

Three nodes, each in a network namespace of its own with an address of its own; the
coordinator (a private Oxia or etcd) and the Command Topic's broker (a private Kafka,
which is also the destination lane's) in the servers' namespace
(``tests/integration/netns_services.py``); checkpoints in a directory every node shares.

The history holds what the checker needs of a cluster run:

* ``op``: every schedule the load queued straight to the Command Topic (``RecordedLoad``,
  a ``cluster_homes.Load`` that records), with its QUEUED receipt (shard, position), or
  ``ok`` false when the append failed;
* ``seen``: every destination record a consumer read (``consumers.KafkaConsumer``);
* ``fault``: each cut and heal;
* after the nodes stopped, ``record`` for every record of every Command Topic partition,
  and ``message``/``result`` for each shard's final state, read from the home whose copy
  of the shard applied the most of its log (its last owner's);
* ``end``.

``producer_calls`` gives the destination records whose attempt a given node process
admitted, with their broker timestamps (Kafka's CreateTime: when the producer was
called), for the partition figures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from nereus.client import prepare_schedule, queue
from nereus.layout import HomeLayout
from nereus.shard import ShardId
from nereus.state.store import ShardStore
from tests.chaos.checker import Facts, Violation, check
from tests.chaos.client import Recorder
from tests.chaos.collect import final_state, record_entries
from tests.chaos.history import (
    Fault,
    FinalMessage,
    HistoryWriter,
    LaneInfo,
    Op,
    Receipt,
    RunEnded,
    RunStarted,
    read_history,
)
from tests.integration.cluster_homes import LANE, ROUTE, Cluster, ClusterSpec, Load
from tests.integration.kafka_topic import TopicRecord, read_topic


@dataclass(frozen=True, slots=True)
class NetSpec(ClusterSpec):
    """A cluster whose nodes run on addresses of their own (``hosts``: node -> address)
    and keep checkpoints in a directory they share (``objects_dir``), so it needs no S3."""

    objects_dir: str = ""
    hosts: tuple[tuple[str, str], ...] = ()

    def cluster_toml(self, route_id: str) -> str:
        return (f'[routes.{ROUTE}]\nid = "{route_id}"\nlog = "kafka"\n'
                f'bootstrap = "{self.bootstrap}"\ntopic = "{self.command_topic}"\n'
                f"partitions = {self.partitions}\n\n"
                f'[lanes.{LANE}]\ndestination = "kafka"\nbootstrap = "{self.bootstrap}"\n'
                f'topic = "{self.topic}"\n\n'
                f'[objects]\nstore = "file"\npath = "{self.objects_dir}"\n\n'
                "[checkpoints]\nevery_records = 20000\nevery_seconds = 30\n")

    def node_toml(self, node_id: str) -> str:
        address = dict(self.hosts)[node_id]
        return ClusterSpec.node_toml(self, node_id).replace('host = "127.0.0.1"',
                                                             f'host = "{address}"')

    def prepare_objects(self) -> None:
        Path(self.objects_dir).mkdir(parents=True, exist_ok=True)


@dataclass
class RecordedLoad(Load):
    """``Load`` whose every append is an ``op`` of the history (one per schedule)."""

    recorder: Recorder | None = None
    _index: int = 0

    def _body(self) -> None:
        assert self.recorder is not None
        n = 0
        step_s = 0.05
        per_step = max(1, int(self.rate * step_s))
        while not self._stop.is_set():
            at = now_ms()
            batch = {f"m{n + i:07d}": at + (n + i) * 7_919 % (self.spread_ms + 1)
                     for i in range(per_step)}
            n += per_step
            prepared = [prepare_schedule(self.spec.route, command_id=f"s-{m}",
                                         delay_message_id=m, lane=LANE, deliver_at_ms=due,
                                         key=m, payload=m.encode())
                        for m, due in batch.items()]
            invoke_seq, invoked = self.recorder.tick(), now_ms()
            try:
                queued = queue(prepared, self.logs)
            except Exception as exc:  # not acknowledged: indeterminate, like Jepsen's :info
                self.errors.append(f"{type(exc).__name__}: {exc}")
                done, complete_seq = now_ms(), self.recorder.tick()
                for item in prepared:
                    self._op(item.delay_message_id or "", batch, invoked, done, invoke_seq,
                             complete_seq, error=str(exc))
            else:
                done, complete_seq = now_ms(), self.recorder.tick()
                for q in queued:
                    m = q.prepared.delay_message_id or ""
                    self._op(m, batch, invoked, done, invoke_seq, complete_seq,
                             receipt=Receipt(evidence="QUEUED", shard=str(q.prepared.shard),
                                             source_position=q.position,
                                             command_id=q.prepared.command_id,
                                             kind=q.prepared.kind))
                self.deliver.update(batch)
            self._stop.wait(max(0.0, step_s - (now_ms() - at) / 1000))

    def _op(self, m: str, batch: dict[str, int], invoked: int, done: int, invoke_seq: int,
            complete_seq: int, *, receipt: Receipt | None = None,
            error: str | None = None) -> None:
        assert self.recorder is not None
        self._index += 1
        self.recorder.write(Op(
            index=self._index, kind="schedule", invoke_ms=invoked, complete_ms=done,
            ok=receipt is not None, message_id=m, lane=LANE, key=m, deliver_at_ms=batch[m],
            payload_bytes=len(m), receipts=[] if receipt is None else [receipt],
            error=error, invoke_seq=invoke_seq, complete_seq=complete_seq))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class FaultLog:
    """The cuts and heals of a run, written into its history as they happen."""

    recorder: Recorder
    open: dict[str, int] = field(default_factory=dict)

    def start(self, nemesis: str, detail: str) -> int:
        at = now_ms()
        self.recorder.write(Fault(nemesis=nemesis, phase="start", at_ms=at, detail=detail))
        self.open[nemesis] = at
        return at

    def heal(self, nemesis: str, detail: str) -> int:
        at = now_ms()
        self.recorder.write(Fault(nemesis=nemesis, phase="heal", at_ms=at, detail=detail))
        self.open.pop(nemesis, None)
        return at


def run_started(spec: ClusterSpec, nemeses: list[str]) -> RunStarted:
    return RunStarted(seed=0, backend="kafka", nemeses=nemeses, ops=0, duration_s=0.0,
                      lanes=[LaneInfo(name=LANE, destination="kafka", target=spec.topic)],
                      shards=[str(s) for s in spec.shards], started_ms=now_ms(),
                      home="(cluster)")


def collect(cluster: Cluster, recorder: Recorder, *, quiesced: bool, faults: int,
            notes: list[str]) -> None:
    """After every node stopped: the Command Topic's records, each shard's final state (its
    newest copy), and the end of the run."""
    spec = cluster.spec
    with spec.logs() as logs:
        for shard in spec.shards:
            log = logs(shard)
            end, position = log.end_position(), 0
            while position < end:
                batch = log.read(position, 2_000)
                if not batch:
                    break
                for item in batch:
                    for record in record_entries(str(shard), item.position, item.broker_ms,
                                                 item.payload):
                        recorder.write(record)
                position = batch[-1].position + 1
    for shard in spec.shards:
        for entry in final_state(_newest_home(cluster, shard), str(shard)):
            recorder.write(entry)
    recorder.write(RunEnded(ended_ms=now_ms(), quiesced=quiesced, faults=faults,
                            notes=notes))


def _newest_home(cluster: Cluster, shard: ShardId) -> Path:
    """The home whose copy of ``shard`` applied the most of its log."""
    best: tuple[int, Path] | None = None
    for node_id in cluster.nodes:
        home = cluster.home(node_id)
        path = HomeLayout(home).shard_state(shard)
        if not path.exists():
            continue
        with ShardStore.open(path, read_only=True) as store:
            applied = store.applied_position()
        if applied is not None and (best is None or applied > best[0]):
            best = (applied, home)
    assert best is not None, f"no home holds a state of {shard}"
    return best[1]


def judged(history: Path) -> tuple[Facts, list[Violation]]:
    lines = read_history(history)
    return Facts.of(lines), check(lines)


def producer_calls(facts: Facts, records: list[TopicRecord], pid: int) -> list[int]:
    """The broker timestamps (the producer's call time) of the destination records whose
    attempt was admitted by the node process ``pid``, in order."""
    mine = {attempt_id for attempt_id, (attempt, _) in facts.attempts.items()
            if f":{pid}:" in attempt.owner_id}
    return sorted(r.timestamp_ms for r in records if r.attempt_id in mine)


def destination(spec: ClusterSpec) -> list[TopicRecord]:
    return read_topic(spec.bootstrap, spec.topic)


def with_hosts(spec: NetSpec, hosts: dict[str, str]) -> NetSpec:
    return dataclasses.replace(spec, hosts=tuple(sorted(hosts.items())))


class Watch:
    """Polls ``condition`` on a thread of its own every ``interval_s`` and keeps the wall
    time it first held (``at_ms``)."""

    def __init__(self, condition: object, interval_s: float = 0.05) -> None:
        assert callable(condition)
        self._condition = condition
        self._interval_s = interval_s
        self.at_ms: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="watch")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.at_ms is None:
            with contextlib.suppress(Exception):  # the coordinator busy: the next poll
                if self._condition():
                    self.at_ms = now_ms()
            self._stop.wait(self._interval_s)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


__all__ = ["FaultLog", "FinalMessage", "HistoryWriter", "NetSpec", "RecordedLoad", "Watch",
           "collect", "destination", "judged", "producer_calls", "run_started",
           "with_hosts"]
