"""System records on their way from a shard loop into its Shard Log.

Publisher answers arrive on any thread and only wait in a queue here (the callback never
touches RocksDB); the loop turns them into PUBLISH_OUTCOME records, since it alone knows
the owner, the epoch and the message. Records the loop has encoded — outcomes, admissions,
CLAIM_RESULT records — wait in the outbox until the log takes them. A failed append is
retried with the very same bytes (dedup makes a repeat harmless), never a new identity and
never a direct send. The outbox lives on the loop object, not in a call's locals, so it is
kept across a crash and restart of the loop's thread.

At feature level 2 (``PUBLISH_BATCH_LEVEL``) each run of admissions and outcomes waiting
together goes into the log as one PUBLISH_BATCH (``nereus.records.batch``): one frame,
read, hash and dispatch for the turn instead of one per record. The members are the very
bytes each record has alone, so a retried append whose envelope differs (more records
joined it) still repeats each member harmlessly. Below that level each is its own record.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence

from nereus.adapters.backends.destination.protocol import PublishResult
from nereus.adapters.backends.shardlog.protocol import Receipt, ShardLog
from nereus.adapters.time_source import Clock
from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.engine.scheduler.admission import PreparedAdmission
from nereus.features import BASE_LEVEL, PUBLISH_BATCH_LEVEL
from nereus.records import Disposition, Outcome
from nereus.records.batch import MAX_BATCH_MEMBERS, encode_batch
from nereus.shard import ShardId

APPEND_RETRIES = 5
BATCH_BYTES = 256 * 1024  # a PUBLISH_BATCH's members' bytes, at most (well under 1 MiB)


class Outbox:
    """One shard loop's publisher answers and the system records it has yet to append."""

    def __init__(self, shard: ShardId, log: ShardLog, *, time: Clock, events: EventLog,
                 wake: threading.Event, feature_level: int = BASE_LEVEL) -> None:
        self._shard = shard
        self._level = feature_level
        self._log = log
        self._time = time
        self._events = events
        self._wake = wake
        self._answers: queue.SimpleQueue[PublishResult] = queue.SimpleQueue()
        # (attempt id of an admission, bytes, an admission or outcome: may go in a batch)
        self._records: list[tuple[str | None, bytes, bool]] = []

    def __bool__(self) -> bool:
        """Records wait to be appended."""
        return bool(self._records)

    def reply(self, result: PublishResult) -> None:
        """A publisher's answer (any thread): becomes a PUBLISH_OUTCOME on the loop."""
        self._answers.put(result)
        self._wake.set()

    def decline(self, attempt_id: str, why: str) -> None:
        """This owner will not send the attempt: NOT_PUBLISHED LANE_UNAVAILABLE."""
        self._answers.put(PublishResult(attempt_id, Outcome.NOT_PUBLISHED,
                                        Disposition.LANE_UNAVAILABLE, why))

    def answers(self) -> Iterator[PublishResult]:
        """Take every answer waiting now, oldest first."""
        while True:
            try:
                yield self._answers.get_nowait()
            except queue.Empty:
                return

    def add(self, records: Iterable[bytes]) -> None:
        """Encoded records that are neither admissions nor outcomes (claim results, ...)."""
        self._records.extend((None, data, False) for data in records)

    def add_outcome(self, data: bytes) -> None:
        """One encoded PUBLISH_OUTCOME."""
        self._records.append((None, data, True))

    def add_admissions(self, admissions: Iterable[PreparedAdmission]) -> None:
        """Each prepared admission's exact PUBLISH_ADMISSION bytes."""
        self._records.extend((admission.attempt_id, admission.data, True)
                             for admission in admissions)

    def drop_admissions(self, attempt_ids: Collection[str]) -> None:
        """Admissions whose claims expired before they reached the log."""
        self._records = [item for item in self._records if item[0] not in attempt_ids]

    def drop_every_admission(self) -> None:
        """No admission of a fenced owner goes into the log; its outcomes still do."""
        self._records = [item for item in self._records if item[0] is None]

    def flush(self) -> bool:
        """Append every record waiting (the same bytes on every retry); False if none."""
        if not self._records:
            return False
        self.append(self._payloads())
        self._records.clear()
        return True

    def _payloads(self) -> list[bytes]:
        """The records in order; at level 2, each run of admissions and outcomes (up to
        ``MAX_BATCH_MEMBERS`` and ``BATCH_BYTES``) as one PUBLISH_BATCH."""
        if self._level < PUBLISH_BATCH_LEVEL:
            return [data for _, data, _ in self._records]
        out: list[bytes] = []
        run: list[bytes] = []
        size = 0
        for _, data, batchable in self._records:
            if run and (not batchable or len(run) == MAX_BATCH_MEMBERS
                        or size + len(data) > BATCH_BYTES):
                out.append(self._envelope(run))
                run, size = [], 0
            if batchable:
                run.append(data)
                size += len(data)
            else:
                out.append(data)
        if run:
            out.append(self._envelope(run))
        return out

    def _envelope(self, run: list[bytes]) -> bytes:
        """One record alone as itself; several in one PUBLISH_BATCH."""
        return run[0] if len(run) == 1 else encode_batch(run, self._level)

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        """Append with retries of the very same bytes (dedup makes a repeat harmless)."""
        delay = 0.01
        for attempt in range(APPEND_RETRIES):
            try:
                return list(self._log.append(payloads))
            except OSError as exc:
                if attempt == APPEND_RETRIES - 1:
                    raise
                safe_event(self._events, "append_retry", shard=str(self._shard),
                           error=str(exc))
                self._time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover
