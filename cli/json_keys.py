"""The JSON documents each command prints with ``--json``, as a declarative table.

Typer knows a command's options but not what it prints, so the keys live here, filled by
reading each command's implementation; the man pages (``nereus.cli.reference``) render
them. A command missing from ``JSON_KEYS`` is still documented ("see the --json output"),
and ``tests/cli/test_reference.py`` lists the missing ones so they get filled in. When a
command's output changes, change its entry here and run ``make reference``.

Keys are snake_case. ``nested`` names the keys inside an object value, or inside each
object of a list value (``"receipts"`` -> the keys of each receipt); dotted names reach
deeper (``"lanes.shards"``).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from nereus.adapters.command_lookup import CommandStatus
from nereus.adapters.large_payload import LargePayloadReceipt
from nereus.cli.batch_receipts import ScheduledBatch
from nereus.cli.mutation.document import (
    MutationDocument,
    MutationDryRun,
    Mutations,
    MutationsDryRun,
)
from nereus.client import Receipt
from nereus.engine.admin.documents import EngineStatus, LaneView, OpenAttemptView
from nereus.views import MessageDetail, MessageList

Form = Literal["object", "array", "lines", "none"]


@dataclass(frozen=True, slots=True)
class JsonDoc:
    """What one command prints on stdout with ``--json``.

    ``form``: ``object`` (one JSON object), ``array`` (one JSON array of objects with
    ``keys``), ``lines`` (JSON lines: one object per line), ``none`` (no JSON document;
    ``note`` says why).
    """

    form: Form
    keys: tuple[str, ...] = ()
    nested: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    note: str = ""
    source: type[msgspec.Struct] | None = None  # the Struct the keys come from (``typed``)
    # other forms the same command prints (``init --from``, ``--batch``, ``--dry-run``): a
    # document matches ``source`` or one of these; ``note`` says when each is printed
    alternatives: tuple[type[msgspec.Struct], ...] = ()


def typed(document: type[msgspec.Struct], *, note: str = "",
          form: Literal["object", "array", "lines"] = "object",
          alternatives: tuple[type[msgspec.Struct], ...] = ()) -> JsonDoc:
    """The entry of a command whose document is a msgspec Struct: its keys are the Struct's
    fields, and a field holding a Struct (or a list of them) documents that Struct's keys.
    ``array`` and ``lines`` documents hold one ``document`` per element or line.
    ``alternatives`` are the Structs of the command's other forms (named in ``note``).
    ``tests/cli/test_typed_documents.py`` checks the command prints exactly this."""
    nested: dict[str, tuple[str, ...]] = {}
    _nest(document, "", nested)
    return JsonDoc(form, tuple(f.encode_name for f in msgspec.structs.fields(document)),
                   nested=nested, note=note, source=document, alternatives=alternatives)


def _nest(document: type[msgspec.Struct], prefix: str,
          nested: dict[str, tuple[str, ...]]) -> None:
    """The keys inside each Struct-valued field, dotted for deeper levels (``lanes.shards``)."""
    for member in msgspec.structs.fields(document):
        inner = _struct_in(member.type)
        if inner is not None:
            name = prefix + member.encode_name
            nested[name] = tuple(f.encode_name for f in msgspec.structs.fields(inner))
            _nest(inner, name + ".", nested)


def _struct_in(annotation: object) -> type[msgspec.Struct] | None:
    """The Struct type inside ``annotation`` (itself, a list of it, or it | None)."""
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return annotation
    for arg in typing.get_args(annotation):
        found = _struct_in(arg)
        if found is not None:
            return found
    return None


# The error document any command prints with --json when it fails (exit status 1-5).
ERROR_KEYS: tuple[str, ...] = ("ok", "error", "hint", "exit_code")

# a receipt's keys (``nereus.client.Receipt``): the QUEUED ones, then those an APPLIED
# result adds
RECEIPT_AND_APPLIED = tuple(f.encode_name for f in msgspec.structs.fields(Receipt))
CHECK = ("name", "ok", "detail", "skipped")
CATALOG_ENTRY = ("checkpoint_id", "applied_position", "digest", "created_at")

_RECEIPT_DOC = typed(
    Receipt,
    note="QUEUED receipts carry the first seven keys; with --wait (evidence APPLIED) the "
    "applied result adds the others.",
)

# Operator mutations: one document, the queued receipts and (with --wait) their results.
_MUTATION_NOTE = (
    "result is QUEUED, APPLIED, STALE or REJECTED; with --dry-run it is DRY_RUN and each "
    "receipt carries would_result, would_reason, would_detail instead of a position "
    "(source_position and broker_time null, evidence DRY_RUN). impact.lanes.changed maps "
    "each policy setting that changes to its from and to; shard_pause only for a pause or "
    "a resume.")
MUTATION = typed(MutationDocument, note=_MUTATION_NOTE, alternatives=(MutationDryRun,))

PLAYBOOK_STEP = ("id", "title", "description", "run", "home", "for_each", "pre", "post", "wait",
                 "confirm", "on_failure", "exit_codes", "timeout", "continue_on_failure")

_FLOOR = ("shard", "keep", "object_store", "floor_position", "floor_objects",
          "log_start_position", "members")

JSON_KEYS: dict[str, JsonDoc] = {
    "init": JsonDoc(
        "object", ("home", "config", "routes", "shards", "lanes"),
        nested={"routes": ("route", "log", "partitions", "command_topic", "route_id",
                           "attached"),
                "lanes": ("lane", "destination", "path")},
        note="With --from HOME: home, config, from, object_store, routes, shards, copied_logs "
        "(each: shard, from, to, segments).",
    ),
    "quickstart": JsonDoc(
        "object", ("ok", "home", "outbox", "engine_log", "scheduled", "cancelled", "rescheduled",
                   "published", "missing", "receipts", "replays"),
        nested={"published": ("delay_message_id", "attempt_id", "lane", "generation",
                              "deliver_at", "published_at", "key", "headers", "payload",
                              "payload_encoding", "lateness_ms"),
                "receipts": RECEIPT_AND_APPLIED,
                "replays": ("shard", "records", "live_digest", "replay_digest", "match")},
    ),
    "doctor": JsonDoc("object", ("ok", "home", "checks"),
                      nested={"checks": ("name", "ok", "severity", "detail", "fix")}),
    "dashboard": JsonDoc("none", note="Interactive (Textual): --json is refused with exit "
                         "status 2; scripts use shard list, lane list or attempt list."),
    "completion": JsonDoc("object", ("shell", "script"),
                          note="Without --json the script itself is printed."),
    "engine start": JsonDoc("object", ("running", "pid", "socket", "log", "shards"),
                            note="With --foreground the engine runs attached and prints its "
                            "log instead."),
    "engine stop": JsonDoc("object", ("running", "stopped", "pid")),
    "engine status": typed(
        EngineStatus,
        note="Exit status 1 when a shard or worker is not healthy (problems says which and "
        "why). When no engine runs: running, ok, error, hint, exit_code (exit status 4).",
    ),
    "message schedule": typed(
        Receipt, alternatives=(LargePayloadReceipt, ScheduledBatch),
        note="QUEUED receipts carry the first seven keys; with --wait (evidence APPLIED) the "
        "applied result adds the others. The large-payload path (--payload-file above the "
        "inline limit) adds payload_id, payload_bytes, payload_sha256, payload_object and "
        "payload_stages (the PAYLOAD_RESERVE and PAYLOAD_COMMIT receipts). With --batch: "
        "queued, rejected, receipts (one receipt per line, with its line number in line). "
        "Exit status 6 with --wait when a result is not known yet.",
    ),
    "command show": typed(
        CommandStatus,
        note="evidence APPLIED (exit status 0, or 1 when REJECTED or STALE) or QUEUED (exit "
        "status 6: durable in the Shard Log, not applied yet)."),
    "message cancel": _RECEIPT_DOC,
    "message reschedule": _RECEIPT_DOC,
    "message show": typed(MessageDetail),
    "message list": typed(MessageList),
    "shard list": JsonDoc(
        "array", ("shard", "state", "applied_position", "log_end_position", "lag"),
        note="With the engine running, each shard also carries epoch, caught_up, claims, "
        "in_flight, admissions, uncertain, error, due_backlog.",
    ),
    "shard inspect": JsonDoc(
        "object", ("shard", "route", "partition", "schema_version", "applied_position",
                   "records_applied", "messages_by_state", "open_obligations",
                   "timeline_head_ms", "timeline_head", "paused", "activation", "lanes",
                   "log_end_position", "lag", "db"),
        nested={"lanes": ("lane", "gate", "messages_by_state", "open_attempts", "admissions",
                          "next_due_ms", "next_due", "capacity", "retry_max", "ordered"),
                "db": ("path", "estimated_keys", "live_data_bytes")},
    ),
    "shard log": JsonDoc(
        "lines", ("position", "broker_time", "broker_ms", "kind", "ids", "summary",
                  "size_bytes"),
        note="One object per record; size_bytes only for UNDECODABLE records.",
    ),
    "shard dump": JsonDoc("object", ("shard", "count", "truncated", "entries"),
                          nested={"entries": ("family", "key", "value")}),
    "shard replay": JsonDoc(
        "object", ("shard", "records_applied", "applied_position", "digest", "into",
                   "from_checkpoint", "compare", "expected_digest", "match"),
        note="from_checkpoint with --from-checkpoint or --compare; compare, expected_digest "
        "and match only with --compare (exit status 1 when the digests differ).",
    ),
    "shard digest": JsonDoc("object", ("shard", "digest", "applied_position", "db")),
    "shard prune": JsonDoc("object", ("shard", "before", "floor_position", "dry_run", "deleted",
                                      "log_start_position")),
    "shard pause": MUTATION,
    "shard resume": MUTATION,
    "message break": MUTATION,
    "lane list": typed(LaneView, form="array"),
    "lane open": MUTATION,
    "lane close": MUTATION,
    "lane set": MUTATION,
    "attempt list": typed(OpenAttemptView, form="array",
                          note="evidence_search is null until the evidence worker has "
                          "searched the destination for the attempt."),
    "attempt resolve": MUTATION,
    "mutate submit": typed(
        MutationDocument, alternatives=(MutationDryRun, Mutations, MutationsDryRun),
        note=_MUTATION_NOTE + " A file of several [[mutation]] tables prints mutations (one "
        "document each) and result (STALE or REJECTED when one of them is, else the "
        "first's)."),
    "checkpoint create": JsonDoc(
        "object", ("checkpoint_id", "shard", "applied_position", "digest", "parent", "files",
                   "size_bytes", "created_at", "object_store", "manifest_key")),
    "checkpoint list": JsonDoc(
        "object", ("shard", "checkpoints"),
        nested={"checkpoints": (*CATALOG_ENTRY, "in_recovery_set")}),
    "checkpoint verify": JsonDoc("object", ("ok", "path", "checkpoint_id", "checks"),
                                 nested={"checks": CHECK},
                                 note="Exit status 1 when a check fails."),
    "checkpoint restore": JsonDoc(
        "object", ("checkpoint_id", "shard", "into", "applied_position", "digest", "ok",
                   "replaced", "checks"),
        nested={"checks": CHECK},
        note="replaced: null (into was new or empty), restored (an earlier restore's output) "
        "or foreign (a directory confirmed with --force --yes or at the prompt). Exit status "
        "1 when a check fails (nothing is left at into) or into is a live store."),
    "checkpoint prune": JsonDoc(
        "object", ("shard", "keep", "recovery_set_keep", "dry_run", "object_store", "kept",
                   "deleted", "refused"),
        nested={"refused": ("checkpoint_id", "applied_position", "reason")},
        note="kept and deleted are lists of checkpoint ids; exit status 1 when a checkpoint "
        "was refused (a Recovery Set member)."),
    "recovery-set show": JsonDoc("object", _FLOOR, nested={"members": CATALOG_ENTRY}),
    "recovery-set verify": JsonDoc(
        "object", (*_FLOOR, "ok", "checks", "member_reports"),
        nested={"members": CATALOG_ENTRY, "checks": CHECK,
                "member_reports": ("checkpoint_id", "ok", "checks")},
        note="Exit status 1 when a check fails."),
    "playbook list": JsonDoc("array", ("name", "title", "origin", "shadows_shipped", "path",
                                       "required_vars", "error")),
    "playbook show": JsonDoc(
        "object", ("name", "title", "description", "origin", "path", "shadows_shipped",
                   "on_failure", "variables", "steps"),
        nested={"variables": ("name", "description", "default", "required", "type", "choices"),
                "steps": PLAYBOOK_STEP, "steps.wait": ("until", "timeout", "interval")}),
    "playbook run": JsonDoc(
        "object", ("name", "run_id", "ok", "exit_code", "resumed", "journal", "variables",
                   "stopped_at", "stop_reason", "detail", "steps", "path"),
        nested={"steps": ("id", "title", "ok", "status", "args", "home", "exit_code", "checks",
                          "detail", "polls", "elapsed_ms", "guidance", "output")},
        note="Step progress goes to stderr under --json. With --dry-run: name, title, dry_run, "
        "path, home, variables, journal, resume_from, steps (the plan, each step with index and "
        "done_before)."),
    "payload gc": JsonDoc("object", ("dry_run", "object_store", "deleted", "kept"),
                          nested={"deleted": ("key", "size_bytes", "reason"),
                                  "kept": ("key", "size_bytes", "reason")}),
}


def json_doc(command: str) -> JsonDoc | None:
    """The entry for ``command`` (its words after ``nereus``, e.g. ``"lane list"``)."""
    return JSON_KEYS.get(command)
