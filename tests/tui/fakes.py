"""Fixed data for the dashboard tests: a source that replays status documents, a source
whose engine is down, and a mutation runner that records instead of running the CLI.

The documents have the shapes ``GET /v1/status`` and ``GET /v1/attempts`` answer, with
fixed times, so what the dashboard draws from them is the same on every run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

from nereus.adapters.admin.wire import EngineStatus, MessageExplanation, OpenAttemptView
from nereus.errors import EngineUnreachable, NotFound
from nereus.tui.mutations import LaneMutation, MutationOutcome
from nereus.tui.source import Snapshot
from nereus.views import MessageDetail, MessageView

SOCKET = "/srv/nereus/run/admin.sock"
UNCERTAIN_MESSAGE = "order-7731"
UNCERTAIN_ATTEMPT = "a1b2c3d4e5f60718-2a"


def status_document(tick: int) -> dict[str, Any]:
    """The engine's status at ``tick`` seconds after 12:00:00: the ``payments`` backlog
    grows while its lane is closed; ``local`` admits 5 messages a second."""
    return {
        "running": True,
        "healthy": True,
        "problems": [],
        "workers": [],
        "owner_id": "host-a:4242:5f0c1d2e",
        "home": "/srv/nereus",
        "started_at": "2026-11-29T11:00:00.000Z",
        "trusted_time": {"earliest": f"2026-11-29T12:00:{tick:02d}.000Z",
                         "latest": f"2026-11-29T12:00:{tick:02d}.040Z", "uncertainty_ms": 40},
        "shards": [
            {"shard": "default/0", "state": "ACTIVE", "epoch": 3, "applied_position": 1200 + tick,
             "log_end_position": 1201 + tick, "lag": 0, "caught_up": True, "claims": 0,
             "in_flight": 1, "admissions": 400 + 3 * tick, "uncertain": 1, "error": None,
             "waiting": None, "due_backlog": 2 * tick},
            {"shard": "default/1", "state": "ACTIVE", "epoch": 3, "applied_position": 980 + tick,
             "log_end_position": 984 + tick, "lag": 3, "caught_up": False, "claims": 2,
             "in_flight": 0, "admissions": 350 + 2 * tick, "uncertain": 0, "error": None,
             "waiting": None, "due_backlog": tick},
        ],
        "lanes": [
            {"lane": "local", "destination": "file", "gate": "OPEN", "readiness": "READY",
             "not_ready_reason": None, "due_backlog": 0, "in_flight": 1, "open_attempts": 2,
             "published": 740 + 5 * tick, "failures": 0,
             "messages_by_state": {"SCHEDULED": 12, "PUBLISHED": 740 + 5 * tick},
             "admissions": 745 + 5 * tick, "due_lag_p99_ms": None, "due_lag_max_ms": None,
             "shards": [
                 {"shard": "default/0", "gate": "OPEN", "due_backlog": 0, "open_attempts": 2,
                  "admissions": 400 + 3 * tick},
                 {"shard": "default/1", "gate": "OPEN", "due_backlog": 0, "open_attempts": 0,
                  "admissions": 345 + 2 * tick}]},
            {"lane": "payments", "destination": "kafka", "gate": "CLOSED",
             "readiness": "NOT_READY", "not_ready_reason": "broker timeout",
             "due_backlog": 3 * tick, "in_flight": 0, "open_attempts": 0, "published": 5,
             "failures": 2, "messages_by_state": {"SCHEDULED": 3 * tick, "PUBLISHED": 5},
             "admissions": 5, "due_lag_p99_ms": 1000 * tick, "due_lag_max_ms": 1500 * tick,
             "waiting_by_reason": {"admissionGate CLOSED": 3 * tick, "not due": 4},
             "shards": [
                 {"shard": "default/0", "gate": "CLOSED", "due_backlog": 2 * tick,
                  "open_attempts": 0, "admissions": 0},
                 {"shard": "default/1", "gate": "CLOSED", "due_backlog": tick,
                  "open_attempts": 0, "admissions": 5}]},
        ],
    }


def attempt_documents() -> list[dict[str, Any]]:
    """One UNKNOWN (UNCERTAIN) attempt and one still PUBLISHING, both on ``local``."""
    return [
        {"attempt_id": "a1b2c3d4e5f60718-29", "attempt_no": 1, "delay_message_id": "order-7730",
         "lane": "local", "state": "PUBLISHING", "generation": 1, "owner_id": "host-a:4242",
         "admitted_position": 1190, "admitted_at": "2026-11-29T11:59:58.000Z",
         "disposition": "NONE", "evidence": None, "settled_position": None, "settled_by": None,
         "late_outcomes": [], "shard": "default/0", "evidence_search": None},
        {"attempt_id": UNCERTAIN_ATTEMPT, "attempt_no": 2, "delay_message_id": UNCERTAIN_MESSAGE,
         "lane": "local", "state": "UNKNOWN", "generation": 1, "owner_id": "host-a:4242",
         "admitted_position": 1100, "admitted_at": "2026-11-29T11:58:00.000Z",
         "disposition": "UNKNOWN", "evidence": None, "settled_position": None,
         "settled_by": None, "late_outcomes": [], "shard": "default/0", "evidence_search": None},
    ]


def status_of(document: Mapping[str, Any]) -> EngineStatus:
    """A status document as the dashboard reads it (typed, as the admin wire has it)."""
    return msgspec.convert(document, EngineStatus)


def attempts_of(documents: Sequence[Mapping[str, Any]]) -> list[OpenAttemptView]:
    return msgspec.convert(documents, list[OpenAttemptView])


def snapshots(ticks: int = 5) -> list[Snapshot]:
    return [Snapshot(status=status_of(status_document(tick)),
                     attempts=attempts_of(attempt_documents()))
            for tick in range(1, ticks + 1)]


def message_document(delay_message_id: str = UNCERTAIN_MESSAGE) -> dict[str, Any]:
    """``GET /v1/messages/<id>`` for the UNCERTAIN message."""
    attempt = {k: v for k, v in attempt_documents()[1].items()
               if k not in ("shard", "evidence_search")}
    return {
        "delay_message_id": delay_message_id, "shard": "default/0", "lane": "local",
        "state": "UNCERTAIN", "generation": 1, "deliver_at": "2026-11-29T11:58:00.000Z",
        "deliver_at_ms": 1795996680000, "action_at": "2026-11-29T11:58:00.000Z",
        "expire_at": None, "key": "customer-19", "headers": {"trace": "t-1"},
        "payload_bytes": 128, "retries": 1, "open_attempt_id": UNCERTAIN_ATTEMPT,
        "detail": None, "created_position": 1000, "updated_position": 1100,
        "attempts": [attempt], "applied_position": 1205, "log_end_position": 1206,
        "barrier_position": None, "conclusive": False,
    }


class FakeSource:
    """Replays fixed snapshots, then holds the feed open until the app stops it."""

    where = SOCKET

    def __init__(self, snapshot_list: Sequence[Snapshot],
                 messages: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.snapshot_list = list(snapshot_list)
        self.documents = {name: msgspec.convert(doc, MessageDetail) for name, doc in
                          (messages or {UNCERTAIN_MESSAGE: message_document()}).items()}
        self.connects = 0
        self.message_calls: list[tuple[str, str]] = []

    def snapshots(self, stop: threading.Event) -> Iterator[Snapshot]:
        self.connects += 1
        yield from self.snapshot_list
        stop.wait()

    def message(self, delay_message_id: str, *, route: str) -> MessageDetail:
        self.message_calls.append((delay_message_id, route))
        if delay_message_id not in self.documents:
            raise NotFound(f"no message {delay_message_id}")
        return self.documents[delay_message_id]

    def explain(self, delay_message_id: str, *, route: str) -> MessageExplanation:
        found = self.documents.get(delay_message_id)
        if found is None:
            raise NotFound(f"no message {delay_message_id}")
        return MessageExplanation(
            delay_message_id=delay_message_id, shard=found.shard, lane=found.lane,
            state=found.state, generation=found.generation, action_at=found.action_at or "",
            deliver_at=found.deliver_at or "", expire_at=None, trusted_earliest=None,
            trusted_latest=None, held_by="lane_gate",
            why="CLOSED: set by carol (position 9): INC-7", gates=[], scheduler_waiting=None)

    def messages(self, *, lane: str | None = None, shard: str | None = None,
                 limit: int = 50) -> Sequence[MessageView]:
        found = [doc for doc in self.documents.values()
                 if (lane is None or doc.lane == lane) and (shard is None or doc.shard == shard)]
        return found[:limit]


class DownSource(FakeSource):
    """No engine answers for the first ``failures`` connections (forever if None)."""

    def __init__(self, snapshot_list: Sequence[Snapshot] = (), *,
                 failures: int | None = None) -> None:
        super().__init__(snapshot_list)
        self.failures = failures

    def snapshots(self, stop: threading.Event) -> Iterator[Snapshot]:
        if self.failures is None or self.connects < self.failures:
            self.connects += 1
            raise EngineUnreachable(
                f"the engine is not running (no answer at {SOCKET}: No such file or directory)",
                hint="start it with `nereus engine start`")
        return super().snapshots(stop)


class RecordingRunner:
    """Records each mutation and answers like ``nereus --json lane close`` would."""

    def __init__(self) -> None:
        self.calls: list[LaneMutation] = []
        self.lock = threading.Lock()

    def run(self, mutation: LaneMutation) -> MutationOutcome:
        with self.lock:
            self.calls.append(mutation)
        return MutationOutcome(mutation=mutation, exit_code=0, document={
            "kind": "LANE_GATE", "target": f"lane {mutation.lane}", "operator": "tester",
            "operator_reason": mutation.reason, "idempotency_key": None, "dry_run": False,
            "receipts": [{"shard": "default/0", "source_position": 1300, "evidence": "QUEUED",
                          "result": None, "reason": None},
                         {"shard": "default/1", "source_position": 990, "evidence": "QUEUED",
                          "result": None, "reason": None}],
            "result": "QUEUED",
        })
