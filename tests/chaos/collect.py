"""The final state of a run, read after the engine stopped: every record of every Shard Log,
every message with its attempts and every result in every shard's database (opened
read-only with the product's own readers), and the state digests — live, and by an
offline replay from empty and from every checkpoint of the Recovery Set (the installed
``nereus shard digest`` / ``shard replay --compare live``, as an operator runs them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nereus.cli.context import Env
from nereus.cli.output import Output
from nereus.machine.apply import dedup_key
from nereus.records import DecodeFailure, decode, kind_of
from nereus.records.batch import records_in
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, Message, Result, decode_value
from tests.chaos.client import CliFailed, run_cli
from tests.chaos.history import (
    Digest,
    Entry,
    FinalAttempt,
    FinalMessage,
    FinalResult,
    LogEntry,
)

READ_CHUNK = 2_000
_FIELDS = ("command_id", "delay_message_id", "attempt_id", "generation", "lane",
           "deliver_at_ms", "expire_at_ms", "decided_earliest_ms", "decided_latest_ms",
           "owner_id")


def log_entries(home: Path, shard: str) -> Iterator[LogEntry]:
    """Every record of ``shard``'s Shard Log, decoded."""
    env = Env(home=home, output=Output(json_mode=True))
    try:
        log = env.shard_log(ShardId.parse(shard), create=False)
        end = log.end_position()
        position = 0
        while position < end:
            batch = log.read(position, READ_CHUNK)
            if not batch:
                break
            for item in batch:
                yield from record_entries(shard, item.position, item.broker_ms, item.payload)
            position = batch[-1].position + 1
    finally:
        env.close()


def record_entries(shard: str, position: int, broker_ms: int, data: bytes) -> list[LogEntry]:
    """The entries of one log record: itself, or each member of a PUBLISH_BATCH as the
    record it carries, at the batch's position."""
    return [log_entry(shard, position, broker_ms, member) for member in records_in(data)]


def log_entry(shard: str, position: int, broker_ms: int, data: bytes) -> LogEntry:
    sha = hashlib.sha256(data).hexdigest()
    record = decode(data)
    if isinstance(record, DecodeFailure):
        return LogEntry(shard=shard, position=position, broker_ms=broker_ms,
                        kind=f"UNDECODABLE:{record.reason}", sha256=sha)
    fields: dict[str, Any] = {f: getattr(record, f) for f in _FIELDS if hasattr(record, f)}
    if hasattr(record, "idempotency_key"):
        fields["command_id"] = record.idempotency_key
    outcome = getattr(record, "outcome", None)
    disposition = getattr(record, "disposition", None)
    return LogEntry(shard=shard, position=position, broker_ms=broker_ms,
                    kind=kind_of(record),
                    sha256=sha, dedup_key=dedup_key(record),
                    outcome=None if outcome is None else str(outcome),
                    disposition=None if disposition is None else str(disposition), **fields)


def final_state(home: Path, shard: str) -> list[Entry]:
    """Every message (with its attempts) and every result of ``shard``'s database."""
    path = Env(home=home, output=Output(json_mode=True)).layout.shard_state(ShardId.parse(shard))
    if not (path / "CURRENT").exists():
        return []
    out: list[Entry] = []
    with ShardStore.open(path, read_only=True) as store:
        for _, raw in store.scan_prefix(keys.MSG):
            message = decode_value(raw, Message)
            attempts = []
            for _, attempt_id in store.scan_prefix(
                    keys.msg_attempt_prefix(message.delay_message_id)):
                value = store.get(keys.attempt_key(attempt_id.decode()))
                if value is not None:
                    attempts.append(final_attempt(decode_value(value, Attempt)))
            out.append(FinalMessage(
                shard=shard, delay_message_id=message.delay_message_id, lane=message.lane,
                state=str(message.state), generation=message.generation,
                deliver_at_ms=message.deliver_at_ms, action_at_ms=message.action_at_ms,
                expire_at_ms=message.expire_at_ms, key=message.key,
                created_position=message.created_position,
                updated_position=message.updated_position,
                schedule_command_id=message.schedule_command_id, detail=message.detail,
                attempts=attempts))
        for key, raw in store.scan_prefix(keys.RESULT):
            result = decode_value(raw, Result)
            out.append(FinalResult(
                shard=shard, dedup_key=key[len(keys.RESULT):].decode(errors="replace"),
                status=str(result.status), kind=result.kind, position=result.position,
                reason=result.reason, detail=result.detail,
                delay_message_id=result.delay_message_id, generation=result.generation,
                attempt_id=result.attempt_id))
    return out


def final_attempt(attempt: Attempt) -> FinalAttempt:
    return FinalAttempt(attempt_id=attempt.attempt_id, attempt_no=attempt.attempt_no,
                        generation=attempt.generation, state=str(attempt.state),
                        admitted_position=attempt.admitted_position,
                        admitted_broker_ms=attempt.admitted_broker_ms,
                        disposition=str(attempt.disposition), evidence=attempt.evidence,
                        settled_position=attempt.settled_position,
                        settled_by=attempt.settled_by, owner_id=attempt.owner_id)


OTHER_SHARD_LIMITS = ("max_inline_payload_bytes = 16\nmax_headers = 1\nmax_header_bytes = 8\n"
                      "max_id_bytes = 8\nmax_clock_ahead_ms = 1\n")


def other_config_home(home: Path, root: Path) -> Path:
    """A home beside ``home`` with the same routes and lanes and other ``[shard]`` limits:
    a replay there decides as the live shard did only if every input of apply is in the
    log (issue 37 break 5)."""
    text = (home / "nereus.toml").read_text()
    head, sep, _ = text.partition("[shard]\n")
    root.mkdir(parents=True, exist_ok=True)
    (root / "nereus.toml").write_text(head + sep + OTHER_SHARD_LIMITS if sep else
                                      text + "\n[shard]\n" + OTHER_SHARD_LIMITS)
    root.chmod(0o700)
    return root


def digests(home: Path, shard: str, other: Path | None = None) -> list[Digest]:
    """The live digest, a replay from empty, a replay from every checkpoint of the shard,
    each up to the live database's position, and (``other``: a home from
    ``other_config_home``) a replay from empty there, under other ``[shard]`` limits."""
    out: list[Digest] = []
    try:
        live = run_cli(home, "shard", "digest", shard, timeout=120)
        out.append(Digest(shard=shard, source="live", digest=live["digest"],
                          applied_position=live["applied_position"]))
    except CliFailed as exc:
        return [Digest(shard=shard, source="live", digest=None, applied_position=None,
                       error=str(exc))]
    sources: list[tuple[str, tuple[str, ...]]] = [("replay:empty", ("--empty",))]
    try:
        listed = run_cli(home, "checkpoint", "list", shard, timeout=60)
        sources += [(f"replay:checkpoint:{c['checkpoint_id']}",
                     ("--from-checkpoint", c["checkpoint_id"]))
                    for c in listed.get("checkpoints", [])]
    except CliFailed as exc:
        out.append(Digest(shard=shard, source="checkpoint list", digest=None,
                          applied_position=None, error=str(exc)))
    if other is not None:
        log_dir = Env(home=home, output=Output(json_mode=True)).layout.shard_log(
            ShardId.parse(shard))
        try:
            replay = run_cli(other, "shard", "replay", shard, "--empty", "--to",
                             str(live["applied_position"]), *(
                                 ("--log-dir", str(log_dir)) if log_dir.is_dir() else ()),
                             timeout=300)
            out.append(Digest(shard=shard, source="replay:empty:other-[shard]-limits",
                              digest=replay["digest"],
                              applied_position=replay["applied_position"]))
        except CliFailed as exc:
            out.append(Digest(shard=shard, source="replay:empty:other-[shard]-limits",
                              digest=None, applied_position=None, error=str(exc)))
    for source, args in sources:
        try:
            replay = run_cli(home, "shard", "replay", shard, *args, "--compare", "live",
                             timeout=300)
            out.append(Digest(shard=shard, source=source, digest=replay["digest"],
                              applied_position=replay["applied_position"]))
        except CliFailed as exc:  # exit 1 with its document: the digests differ
            document = exc.document if isinstance(exc.document, dict) else {}
            out.append(Digest(shard=shard, source=source, digest=document.get("digest"),
                              applied_position=document.get("applied_position"),
                              error=None if document.get("digest") else str(exc)))
    return out
