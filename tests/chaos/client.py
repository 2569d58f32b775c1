"""The chaos client: executes a ``workload.plan`` against a home as its users would, and
writes each operation with its receipt to the history.

Commands are prepared with the client library (``nereus.client``: ids and bytes fixed
before any I/O) and submitted the way the CLI submits them (``nereus.cli.context.Env``):
through the running engine's admin socket (``POST /v1/commands``, with or without waiting
for the APPLIED result), or, when no engine runs, straight to the Shard Logs (QUEUED).
Unlike the CLI, every admin call is bounded by a short timeout, so a stopped engine makes
an operation indeterminate (``ok = False``) instead of blocking the run; a later retry
submits the same prepared command again. Large payloads take the product's own path
(``nereus.adapters.offline.large_payload``). Operator mutations are the installed ``nereus`` run
as an operator would (``lane close/open``, ``shard pause/resume``, ``attempt resolve``).

Two threads execute a plan: one for message commands, one for operator mutations and
queries (a slow CLI call does not delay a schedule). Each is owned by ``Executor.run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from nereus.adapters.admin.admin_client import AdminClient, EngineSink
from nereus.adapters.offline.large_payload import LargeMessage, schedule_large_payload
from nereus.cli.context import Env
from nereus.cli.output import Output
from nereus.client import (
    CommandSink,
    LogSink,
    Prepared,
    prepare_cancel,
    prepare_reschedule,
    prepare_schedule,
)
from nereus.client import Receipt as ClientReceipt
from nereus.errors import NereusError, NotFound
from nereus.shard import ShardId
from tests.chaos.history import Fault, HistoryWriter, Op, QueryAnswer, Receipt
from tests.chaos.workload import OPERATOR_KINDS, Planned, payload_for

ADMIN_TIMEOUT_S = 4.0  # a stopped engine makes a call indeterminate after this long
WAIT_MS = 3_000  # how long a waiting submit lets the engine apply
NEREUS = str(Path(sys.executable).parent / "nereus")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class BoundedAdmin(AdminClient):
    """The admin client with every call bounded by its own timeout (``EngineSink`` asks for
    two minutes and more; a SIGSTOPped engine would hold the run that long)."""

    def post(self, path: str, body: msgspec.Struct, answer: type[Any], *,
             timeout: float | None = None) -> Any:
        return super().post(path, body, answer, timeout=self.timeout)


class Recorder:
    """The history writer shared by the client's threads (and the nemeses and consumers)."""

    def __init__(self, writer: HistoryWriter) -> None:
        self._writer = writer
        self._lock = threading.Lock()
        self.ops = 0
        self.faults = 0
        self._seq = 0

    def tick(self) -> int:
        """The next number of the client's own order of events."""
        with self._lock:
            self._seq += 1
            return self._seq

    def write(self, entry: Any) -> None:
        with self._lock:
            self._writer.write(entry)
            if isinstance(entry, Op):
                self.ops += 1
            if isinstance(entry, Fault) and entry.phase == "start" and \
                    not entry.nemesis.startswith("operator:"):
                self.faults += 1  # a nemesis's (an operator's pause is workload)


@dataclass
class Executor:
    """Runs ``planned`` against ``home`` from ``t0_ms`` on (each op at ``t0_ms + at_ms``),
    recording every operation. ``stop`` ends it early."""

    home: Path
    planned: Sequence[Planned]
    recorder: Recorder
    t0_ms: int
    scratch: Path
    route: str = "default"
    stop: threading.Event = field(default_factory=threading.Event)
    # how a resolve finds an UNKNOWN attempt's record (the consumers know): evidence or None
    evidence_of: Callable[[str], str | None] = field(default=lambda _attempt: None)
    # operator mutations: "own": each its own --idempotency-key, as a script that means
    # every request passes; "cli": the CLI's default, derived from the content
    operator_keys: str = "own"
    _prepared: dict[str, Prepared] = field(default_factory=dict)
    _op_index: dict[str, int] = field(default_factory=dict)
    _placed: dict[str, ShardId] = field(default_factory=dict)
    _index: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.env = Env(home=self.home, output=Output(json_mode=True))
        self.scratch.mkdir(parents=True, exist_ok=True)

    # -- running -----------------------------------------------------------------------------
    def run(self) -> None:
        """Both threads, until every op ran or ``stop`` is set."""
        commands = [p for p in self.planned if p.kind not in OPERATOR_KINDS or p.follows]
        operator = [p for p in self.planned if p.kind in OPERATOR_KINDS and not p.follows]
        side = threading.Thread(target=self._run_all, args=(operator,), name="chaos-operator",
                                daemon=True)
        side.start()
        try:
            self._run_all(commands)
        finally:
            side.join(timeout=120)
            self.env.close()

    def _run_all(self, ops: Sequence[Planned]) -> None:
        for item in ops:
            due = self.t0_ms + item.at_ms
            while not self.stop.is_set() and now_ms() < due:
                self.stop.wait(min(0.05, max(due - now_ms(), 0) / 1000))
            if self.stop.is_set():
                return
            self.execute(item)

    def _next_index(self) -> int:
        with self._lock:
            self._index += 1
            return self._index

    def execute(self, item: Planned) -> None:
        index = self._next_index()
        invoke_seq = self.recorder.tick()
        invoke = now_ms()
        handler: Callable[[Planned], tuple[list[Receipt], QueryAnswer | None, dict[str, Any]]]
        handler = getattr(self, f"_{item.kind}")
        try:
            receipts, answer, extra = handler(item)
            ok, error = True, None
        except (NereusError, CliFailed, OSError, subprocess.SubprocessError,
                ValueError) as exc:
            receipts, answer, extra = [], None, {}
            ok, error = False, f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"
        complete = now_ms()
        complete_seq = self.recorder.tick()
        self.recorder.write(Op(
            index=index, kind=item.kind, invoke_ms=invoke, complete_ms=complete, ok=ok,
            invoke_seq=invoke_seq, complete_seq=complete_seq,
            message_id=item.message_id, lane=item.lane, key=item.key,
            deliver_at_ms=self._time(item.deliver_offset_ms),
            expire_at_ms=self._time(item.expire_offset_ms), payload_bytes=item.payload_bytes,
            large=item.payload_bytes > self.env.config.limits.max_inline_payload_bytes,
            wait=item.wait, target=extra.get("target", item.target), receipts=receipts,
            answer=answer, error=error,
            retry_of=self._op_index.get(item.of or "") if item.kind == "retry" else None))
        self._op_index.setdefault(item.ref, index)

    def _time(self, offset: int | None) -> int | None:
        return None if offset is None else self.t0_ms + offset

    # -- the sink ----------------------------------------------------------------------------
    def _sink(self, wait: bool) -> tuple[CommandSink, bool]:
        """The engine's sink when it runs (``wait`` as asked), else the logs (never waits)."""
        if self.env.engine_running():
            admin = BoundedAdmin(self.env.layout.run / "admin.sock", timeout=ADMIN_TIMEOUT_S
                                 + (WAIT_MS / 1000 if wait else 0))
            return EngineSink(admin, wait_ms=WAIT_MS), wait
        return LogSink(self.env.command_log), False

    def _submit(self, prepared: Prepared, wait: bool) -> list[Receipt]:
        sink, waiting = self._sink(wait)
        return [_receipt(r) for r in sink.submit([prepared], wait=waiting)]

    # -- message commands --------------------------------------------------------------------
    def _schedule(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        assert item.message_id and item.lane and item.deliver_offset_ms is not None
        ref = self.env.route_ref(self.route)
        deliver = self.t0_ms + item.deliver_offset_ms
        expire = self._time(item.expire_offset_ms)
        body = payload_for(item.ref, item.payload_bytes)
        self._placed[item.message_id] = ref.placement(item.message_id, item.lane, item.key)
        if item.payload_bytes > self.env.config.limits.max_inline_payload_bytes:
            return self._schedule_large(item, body, deliver, expire), None, {}
        prepared = prepare_schedule(ref, delay_message_id=item.message_id, lane=item.lane,
                                    deliver_at_ms=deliver, expire_at_ms=expire, key=item.key,
                                    headers={"chaos-ref": item.ref}, payload=body)
        self._prepared[item.ref] = prepared
        return self._submit(prepared, item.wait), None, {}

    def _schedule_large(self, item: Planned, body: bytes, deliver: int,
                        expire: int | None) -> list[Receipt]:
        assert item.message_id and item.lane
        path = self.scratch / f"{item.ref}.bin"
        path.write_bytes(body)
        ids: list[str] = []

        def new_id() -> str:
            ids.append(uuid.uuid4().hex)
            return ids[-1]

        sink, waiting = self._sink(item.wait)
        done = schedule_large_payload(
            sink, self.env.object_store(), self.env.route_ref(self.route),
            LargeMessage(delay_message_id=item.message_id, lane=item.lane,
                         deliver_at_ms=deliver, expire_at_ms=expire, key=item.key,
                         headers={"chaos-ref": item.ref}, path=path),
            max_payload_bytes=self.env.config.limits.max_payload_bytes, now_ms=now_ms(),
            new_id=new_id, wait=waiting)
        # the same SCHEDULE again, for a retry: its ids were ours (payload, reserve, commit,
        # schedule, in that order)
        self._prepared[item.ref] = prepare_schedule(
            self.env.route_ref(self.route), command_id=ids[3],
            delay_message_id=item.message_id, lane=item.lane, deliver_at_ms=deliver,
            expire_at_ms=expire, key=item.key, headers={"chaos-ref": item.ref}, payload=b"",
            payload_ref=ids[0].replace("-", ""))
        path.unlink(missing_ok=True)
        return [_receipt(r) for r in (*done.stages, done.schedule)]

    def _cancel(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        assert item.message_id
        prepared = prepare_cancel(self.env.route_ref(self.route),
                                  command_id=f"cancel-{item.ref}",
                                  delay_message_id=item.message_id,
                                  shard=self._shard_of(item.message_id))
        self._prepared[item.ref] = prepared
        return self._submit(prepared, item.wait), None, {}

    def _reschedule(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        assert item.message_id and item.deliver_offset_ms is not None
        prepared = prepare_reschedule(self.env.route_ref(self.route),
                                      command_id=f"resched-{item.ref}",
                                      delay_message_id=item.message_id,
                                      deliver_at_ms=self.t0_ms + item.deliver_offset_ms,
                                      shard=self._shard_of(item.message_id))
        self._prepared[item.ref] = prepared
        return self._submit(prepared, item.wait), None, {}

    def _retry(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        """The exact prepared command of op ``item.of`` again (same command id and bytes)."""
        prepared = self._prepared.get(item.of or "")
        if prepared is None:
            raise ValueError(f"op {item.of} prepared nothing to retry")
        return self._submit(prepared, item.wait), None, {"target": item.of}

    def _shard_of(self, message_id: str) -> ShardId:
        return self._placed.get(message_id) or \
            self.env.route_ref(self.route).shard_for(message_id)

    # -- queries -----------------------------------------------------------------------------
    def _query(self, item: Planned, *, barrier: bool = False) -> tuple[
            list[Receipt], QueryAnswer, dict[str, Any]]:
        assert item.message_id
        if not self.env.engine_running():
            raise ValueError("no engine runs: a query needs one")
        admin = AdminClient(self.env.layout.run / "admin.sock", timeout=ADMIN_TIMEOUT_S + 30
                            if barrier else ADMIN_TIMEOUT_S)
        try:
            data = admin.message(item.message_id, route=self.route, barrier=barrier)
        except NotFound:  # not found (yet): an answer too
            return [], QueryAnswer(state=None), {}
        return [], QueryAnswer(state=data["state"], generation=data["generation"],
                               applied_position=data["applied_position"],
                               barrier_position=data["barrier_position"],
                               conclusive=bool(data["conclusive"])), {}

    def _query_barrier(self, item: Planned) -> tuple[list[Receipt], QueryAnswer,
                                                     dict[str, Any]]:
        return self._query(item, barrier=True)

    # -- operator mutations (the installed CLI) ------------------------------------------------
    def _mutation(self, *args: str, key: str | None = None) -> list[Receipt]:
        """``nereus ARGS --reason chaos --yes`` (``--wait`` when the engine runs), with the
        idempotency key ``key``, else one of its own (``operator_keys = "own"``) or the
        CLI's default, derived from the content (``"cli"``)."""
        return self._mutation_in(self.home, self.env.engine_running(), *args, key=key)

    def _mutation_in(self, home: Path, running: bool, *args: str,
                     key: str | None = None) -> list[Receipt]:
        """``_mutation`` run in ``home`` (``running``: its engine runs)."""
        wait = ("--wait",) if running else ()
        if key is None and self.operator_keys == "own":
            key = f"chaos-{uuid.uuid4().hex[:12]}"
        own = ("--idempotency-key", key) if key else ()
        document = run_cli(home, *args, "--reason", "chaos", "--yes", *wait, *own)
        return [Receipt(evidence=r["evidence"], shard=r["shard"],
                        source_position=r["source_position"],
                        command_id=r["idempotency_key"], kind=document["kind"],
                        result=r.get("result"), reason=r.get("reason"),
                        duplicate_of=r.get("duplicate_of"))
                for r in document.get("receipts", [])]

    def _lane_close(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        assert item.target
        return self._mutation("lane", "close", item.target), None, {}

    def _lane_open(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        assert item.target
        return self._mutation("lane", "open", item.target, key=_cleanup_key(item)), None, {}

    def _shard_pause(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        assert item.target
        self.recorder.write(Fault(nemesis=f"operator:pause:{item.target}", phase="start",
                                  at_ms=now_ms(), detail=f"shard pause {item.target}"))
        return self._mutation("shard", "pause", item.target), None, {}

    def _shard_resume(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        assert item.target
        try:
            return self._mutation("shard", "resume", item.target,
                                  key=_cleanup_key(item)), None, {}
        finally:
            self.recorder.write(Fault(nemesis=f"operator:pause:{item.target}", phase="heal",
                                      at_ms=now_ms(), detail=f"shard resume {item.target}"))

    def _attempt_resolve(self, item: Planned) -> tuple[list[Receipt], None, dict[str, Any]]:
        """Resolve one UNKNOWN attempt whose record the destination holds (PUBLISHED, with
        that record as verified evidence). Nothing UNKNOWN, or nothing provable: no-op."""
        if not self.env.engine_running():
            raise ValueError("no engine runs: attempt list needs one")
        unknown = run_cli(self.home, "attempt", "list", "--state", "unknown")
        for attempt in unknown if isinstance(unknown, list) else unknown.get("attempts", []):
            evidence = self.evidence_of(str(attempt["attempt_id"]))
            if evidence is None:
                continue
            receipts = self._mutation("attempt", "resolve", str(attempt["attempt_id"]),
                                      "--published", "--evidence", evidence)
            return receipts, None, {"target": str(attempt["attempt_id"])}
        return [], None, {}



class CliFailed(Exception):
    """``nereus`` exited non-zero: ``code`` and what it printed."""

    def __init__(self, message: str, code: int, document: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.document = document


def run_cli(home: Path, *args: str, timeout: float = 60,
            environ: dict[str, str] | None = None) -> Any:
    """``nereus --json ARGS`` on ``home``; its one JSON document (a failure raises
    ``CliFailed`` with the exit code and what it printed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    env.update({"NO_COLOR": "1", "NEREUS_WORKERS": "1", **(environ or {})})
    proc = subprocess.run([NEREUS, "--home", str(home), "--json", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)
    if proc.returncode != 0:
        try:
            document = json.loads(proc.stdout)
        except ValueError:
            document = None
        raise CliFailed(f"nereus {' '.join(args)} exited {proc.returncode}: "
                        f"{(proc.stderr or proc.stdout)[-400:]}", proc.returncode, document)
    return json.loads(proc.stdout) if proc.stdout.strip() else None


def _cleanup_key(item: Planned) -> str | None:
    """The end-of-run cleanup's own idempotency key (a new command whatever came before);
    the workload's mutations keep the CLI's default, as an operator's would."""
    return f"chaos-{item.ref}-{uuid.uuid4().hex[:8]}" if item.ref.startswith("cleanup-") \
        else None


def _receipt(receipt: ClientReceipt) -> Receipt:
    def unset_none(value: Any) -> Any:
        return None if value is msgspec.UNSET else value

    return Receipt(evidence=receipt.evidence, shard=receipt.shard,
                   source_position=receipt.source_position, command_id=receipt.command_id,
                   kind=receipt.kind, result=unset_none(receipt.result),
                   reason=unset_none(receipt.reason), generation=unset_none(receipt.generation),
                   attempt_id=unset_none(receipt.attempt_id),
                   duplicate_of=unset_none(receipt.duplicate_of))
