"""The JSON documents each command prints with ``--json``, as a declarative table.

Typer knows a command's options but not what it prints: each command's document is a
msgspec Struct, and its entry here is generated from that type (``typed``); the man pages
(``nereus.cli.reference``) render them, and ``tests/cli/test_typed_documents.py`` runs each
command and holds what it prints to its type. A command missing from ``JSON_KEYS`` is still
documented ("see the --json output"), and ``tests/cli/test_reference.py`` lists the missing
ones so they get filled in. When a command's output changes, change its Struct and run
``make reference``.

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

from nereus.adapters.admin.engine_process import EngineStarted, EngineStopped
from nereus.adapters.admin.wire import (
    EngineStatus,
    LaneView,
    MessageExplanation,
    MetricsExposition,
    OpenAttemptView,
    ShardView,
)
from nereus.adapters.offline.checkpoint_take import CheckpointTaken
from nereus.adapters.offline.command_lookup import CommandStatus
from nereus.adapters.offline.large_payload import LargePayloadReceipt
from nereus.adapters.offline.upgrade_check import UpgradeCheck
from nereus.checkpoint.verify import CheckpointVerification
from nereus.cli.batch_receipts import ScheduledBatch
from nereus.cli.commands.checkpoint_documents import (
    CheckpointList,
    CheckpointPrune,
    CheckpointRestore,
    CheckpointUpgrade,
    RecoverySetVerification,
    RecoverySetView,
)
from nereus.cli.commands.cluster.documents import (
    ClusterConfigView,
    ClusterInitReport,
    ClusterMigrateReport,
    ClusterRejoinReport,
    ClusterStatus,
    EvidenceKeyRotation,
    EvidenceKeysResealed,
    InitJoinReport,
    NodeDrainReport,
    NodeRow,
    NodeUndrainReport,
    ShardMoveReport,
)
from nereus.cli.commands.engine_logs import EngineLogLines
from nereus.cli.commands.payload import PayloadGc
from nereus.cli.commands.shard.documents import (
    OfflineShard,
    ShardDigest,
    ShardDump,
    ShardPrune,
    ShardReplay,
)
from nereus.cli.commands.status import StatusSummary
from nereus.cli.commands.upgrade import UpgradeFinalize, UpgradeStatus
from nereus.cli.error_document import ErrorDocument
from nereus.cli.mutation.document import (
    MutationDocument,
    MutationDryRun,
    Mutations,
    MutationsDryRun,
)
from nereus.cli.playbook.language.documents import (
    DryRunPlan,
    PlannedStepView,
    PlaybookDefinition,
    PlaybookRow,
    RunReport,
)
from nereus.cli.setup_documents import (
    CompletionScript,
    CopiedLog,
    DoctorReport,
    InitFromReport,
    InitReport,
    QuickstartReport,
)
from nereus.client import Receipt
from nereus.inspection import ShardReport
from nereus.records.summary import LogEntry
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


def keys_of(document: type[msgspec.Struct]) -> str:
    """A Struct's keys as a note names them (``a, b, c``): an alternative form's keys, say."""
    return ", ".join(f.encode_name for f in msgspec.structs.fields(document))


# The error document any command prints with --json when it fails (exit status 1-5, 70);
# crash_file only with exit status 70
ERROR_KEYS: tuple[str, ...] = tuple(f.encode_name for f in msgspec.structs.fields(ErrorDocument)
                                    if f.encode_name != "crash_file")

# a receipt's keys (``nereus.client.Receipt``): the QUEUED ones, then those an APPLIED
# result adds
RECEIPT_AND_APPLIED = tuple(f.encode_name for f in msgspec.structs.fields(Receipt))

_RECEIPT_DOC = typed(Receipt, note="QUEUED receipts carry the first seven keys; with --wait "
                     "(evidence APPLIED) the applied result adds the others.")

# Operator mutations: one document, the queued receipts and (with --wait) their results.
_MUTATION_NOTE = (
    "result is QUEUED, APPLIED, STALE or REJECTED; with --dry-run it is DRY_RUN and each "
    "receipt carries would_result, would_reason, would_detail instead of a position "
    "(source_position and broker_time null, evidence DRY_RUN). impact.lanes.changed maps "
    "each policy setting that changes to its from and to; shard_pause only for a pause or "
    "a resume.")
MUTATION = typed(MutationDocument, note=_MUTATION_NOTE, alternatives=(MutationDryRun,))

# the keys the large-payload path adds to the SCHEDULE's receipt
_PAYLOAD_KEYS = ", ".join(f.encode_name for f in msgspec.structs.fields(LargePayloadReceipt)
                          if f.encode_name not in RECEIPT_AND_APPLIED)


JSON_KEYS: dict[str, JsonDoc] = {
    "init": typed(
        InitReport, alternatives=(InitFromReport, InitJoinReport),
        note=f"With --from HOME: {keys_of(InitFromReport)} (each copied log: "
        f"{keys_of(CopiedLog)}). With --join URL --node-id ID: {keys_of(InitJoinReport)}.",
    ),
    "quickstart": typed(
        QuickstartReport,
        note="Exit status 1 when a message was not published in time (missing) or a replay "
        "did not match the live state.",
    ),
    "doctor": typed(DoctorReport, note="Exit status 1 when a check of severity error fails "
                    "(a failed warning is reported, ok stays true)."),
    "dashboard": JsonDoc("none", note="Interactive (Textual): --json is refused with exit "
                         "status 2; scripts use shard list, lane list or attempt list."),
    "completion": typed(CompletionScript, note="Without --json the script itself is printed."),
    "metrics": typed(MetricsExposition, note="Without --json the exposition text itself is "
                     "printed (what [metrics] listen serves at /metrics)."),
    "engine start": typed(EngineStarted, note="With --foreground the engine runs attached and "
                          "prints its log instead."),
    "engine stop": typed(EngineStopped, note="pid only when an engine was running (stopped "
                         "true)."),
    "status": typed(StatusSummary, note="Exit status 0 whenever it could answer: read healthy "
                    "and problems. On a node of a cluster (node_id set) the shards and "
                    "messages are that node's only, of cluster_shards in the cluster. "
                    "counted_from_disk names the shards no engine loop holds now whose "
                    "messages were read from their database."),
    "message explain": typed(MessageExplanation, note="gates lists every gate in the "
                             "scheduler's order: shard, message, lane_gate, readiness, "
                             "trusted_time, expiry, ordered_head, quota, capacity, permits, "
                             "capability; held_by names the first that holds (null: none)."),
    "engine logs": typed(EngineLogLines, note="Each of lines is the JSON object the engine "
                         "wrote, unchanged. With --follow: one such object per line instead "
                         "of one document."),
    "engine status": typed(
        EngineStatus,
        note="Exit status 1 when a shard or worker is not healthy (problems says which and "
        "why). When no engine runs: running, ok, error, hint, exit_code (exit status 4).",
    ),
    "message schedule": typed(
        Receipt, alternatives=(LargePayloadReceipt, ScheduledBatch),
        note="QUEUED receipts carry the first seven keys; with --wait (evidence APPLIED) the "
        "applied result adds the others. The large-payload path (--payload-file above the "
        f"inline limit) adds {_PAYLOAD_KEYS} (payload_stages: the PAYLOAD_RESERVE and "
        f"PAYLOAD_COMMIT receipts). With --batch: {keys_of(ScheduledBatch)} (one receipt per "
        "line, with its line number in line). Exit status 6 with --wait when a result is not "
        "known yet.",
    ),
    "command show": typed(
        CommandStatus,
        note="evidence APPLIED (exit status 0, or 1 when REJECTED or STALE) or QUEUED (exit "
        "status 6: durable in the Shard Log, not applied yet)."),
    "message cancel": _RECEIPT_DOC,
    "message reschedule": _RECEIPT_DOC,
    "message show": typed(MessageDetail),
    "message list": typed(MessageList),
    "shard list": typed(
        OfflineShard, form="array", alternatives=(ShardView,),
        note="Without an engine each shard is read offline (state STOPPED, or NO_STATE when it "
        "has no database yet). With the engine running, each shard is the engine's view (as "
        "in engine status): it also carries epoch, caught_up, claims, in_flight, admissions, "
        "uncertain, error, waiting, due_backlog, due_backlog_capped.",
    ),
    "shard inspect": typed(
        ShardReport,
        note="log_end_position and lag are null when this home has no log of the shard; "
        "timeline_head and next_due are timeline_head_ms and next_due_ms as UTC text. "
        "disk comes from RocksDB's properties and file list, not a scan: obsolete_bytes is "
        "SST plus WAL bytes beyond the live estimate; terminal_retained_bytes is an estimate "
        "(the terminal share of the messages times the message and attempt families' "
        "bytes); oldest_retained is the first item of the retention family (the next to "
        "expire), null when nothing is retained.",
    ),
    "shard log": typed(
        LogEntry, form="lines",
        note="One object per record; size_bytes only for UNDECODABLE records.",
    ),
    "shard dump": typed(
        ShardDump,
        note="Each entry's key holds the key's parts by name; its value is the decoded value "
        "(the family's fields, a number or text), or undecodable and base64 when it does not "
        "decode.",
    ),
    "shard replay": typed(
        ShardReplay,
        note="from_checkpoint with --from-checkpoint or --compare (null when replay started "
        "--empty); compare, expected_digest and match only with --compare (exit status 1 "
        "when the digests differ). into is null when --into was not given.",
    ),
    "shard digest": typed(ShardDigest),
    "shard prune": typed(
        ShardPrune,
        note="deleted describes each part of the log deleted (with --dry-run: that would be).",
    ),
    "shard pause": MUTATION,
    "shard resume": MUTATION,
    "message break": MUTATION,
    "lane list": typed(LaneView, form="array", note="published counts the lane's messages "
                       "PUBLISHED from the shards' replicated state (a restart keeps it); "
                       "published_since_start and failures count this engine's publish "
                       "calls since it started."),
    "lane open": MUTATION,
    "lane close": MUTATION,
    "lane set": MUTATION,
    "attempt list": typed(OpenAttemptView, form="array",
                          note="evidence_search is null until the evidence worker has "
                          "searched the destination for the attempt."),
    "attempt resolve": MUTATION,
    "mutate submit": typed(
        MutationDocument, alternatives=(MutationDryRun, Mutations, MutationsDryRun),
        note=_MUTATION_NOTE + " A file of several [[mutation]] tables prints "
        f"{keys_of(Mutations)}: mutations holds one document each, and result is STALE or "
        "REJECTED when one of them is, else the first's."),
    "checkpoint create": typed(CheckpointTaken),
    "checkpoint list": typed(CheckpointList),
    "checkpoint verify": typed(CheckpointVerification, note="Exit status 1 when a check fails."),
    "checkpoint upgrade": typed(
        CheckpointUpgrade,
        note="Exit status 1 (and no change) when the checkpoint does not verify as it is.",
    ),
    "checkpoint restore": typed(
        CheckpointRestore,
        note="replaced: null (into was new or empty), restored (an earlier restore's output) "
        "or foreign (a directory confirmed with --force --yes or at the prompt). Exit status "
        "1 when a check fails (nothing is left at into) or into is a live store."),
    "checkpoint prune": typed(
        CheckpointPrune,
        note="kept and deleted are lists of checkpoint ids; exit status 1 when a checkpoint "
        "was refused (a Recovery Set member)."),
    "recovery-set show": typed(RecoverySetView),
    "recovery-set verify": typed(RecoverySetVerification,
                                 note="Exit status 1 when a check fails."),
    "playbook list": typed(PlaybookRow, form="array"),
    "playbook show": typed(PlaybookDefinition),
    "playbook run": typed(
        RunReport, alternatives=(DryRunPlan,),
        note="Step progress goes to stderr under --json. With --dry-run: "
        f"{keys_of(DryRunPlan)} (the plan; each step: {keys_of(PlannedStepView)})."),
    "payload gc": typed(PayloadGc, note="shards: only on a node of a cluster (the shards "
                        "whose objects it judged, those ACTIVE on it)."),
    "cluster init": typed(
        ClusterInitReport,
        note="revision is the one written (with --dry-run: that would be); "
        "new_evidence_keys names the routes whose evidence key the coordinator made now."),
    "cluster config": typed(ClusterConfigView, note="changed_ms is Unix time in ms; toml is "
                            "the configuration's text; audit lists every change, oldest first."),
    "cluster status": typed(
        ClusterStatus,
        note="leader is a node id or null. Nodes are named by the id given to `init --join "
        "--node-id`; a node run as worker processes lists them under workers (worker_id "
        "<node>-w<K>, each with the shards it owns). Each node: alive (it or a worker holds "
        "a member record; a node named only by placements, ownership records or a drain is "
        "listed with alive false and address, host, capacity null) and the shards it owns. "
        "Each shard: owner (a node id) and owner_worker, epoch (null when UNOWNED), state "
        "ACTIVE, RECOVERING, MOVING (its owner is releasing it, or it is placed on another "
        "node), FAILED, OWNER_LOST (its owner is gone while its record lives: detail says "
        "why, lease_left_ms until it goes) or UNOWNED, and placed_on (a node id) with "
        "placed_on_worker."),
    "cluster nodes": typed(NodeRow, form="array", note="The nodes of `cluster status`."),
    "cluster drain": typed(
        NodeDrainReport,
        note="result is DRY_RUN, DRAINING (written), DRAINED (--wait: it owns nothing) or "
        "NOT_YET (--wait ended first; exit status 6); shards are those it (or any of its "
        "workers) still owns."),
    "cluster undrain": typed(NodeUndrainReport, note="undrained is false when the node was "
                             "not draining or with --dry-run."),
    "cluster migrate": typed(
        ClusterMigrateReport,
        note="result is DRY_RUN or MIGRATED; kinds counts the records copied by the key's "
        "first segment; epochs lists each shard's epoch counter as copied (its next owner "
        "activates above it); replaced says what the target held of this cluster before "
        "(an earlier copy, or the place it moved away from), or null. Exit status 1 when a "
        "node is live or the target holds another cluster."),
    "cluster rejoin": typed(
        ClusterRejoinReport,
        note="result is REJOINED (nereus.toml rewritten), UNCHANGED (it named that "
        "coordinator already) or DRY_RUN. Exit status 1 when the engine runs, the "
        "coordinator holds no whole copy of this home's cluster, or the node runs there."),
    "cluster rotate-evidence-key": typed(EvidenceKeyRotation, note="result: ROTATED, DRY_RUN."),
    "cluster reseal-evidence-keys": typed(EvidenceKeysResealed, note="result: RESEALED, DRY_RUN."),
    "shard move": typed(
        ShardMoveReport,
        note="result is DRY_RUN, PLACED (the pinned placement is written), MOVED (--wait: "
        "the target owns it, ACTIVE) or NOT_YET (--wait ended first; exit status 6); owner "
        "and placed_on are as they were before the move, state as it is at the end; "
        "to_worker is the worker of the node the shard was placed on (null for a node run "
        "as one process)."),
    "upgrade check": typed(
        UpgradeCheck,
        note="Offline. Each shard's verdict is CURRENT, MIGRATE (steps lists the migrations "
        "the engine runs at its first open), NO_DATABASE or REFUSED (a newer key schema); "
        "checkpoints counts each shard's catalogued checkpoints by manifest format. Exit "
        "status 1 when refusals is not empty (a downgrade below what has been written)."),
    "upgrade status": typed(
        UpgradeStatus,
        note="scope is cluster (with --coordinator or a [cluster] table) or home; nodes (a "
        "cluster's) are every node that owns or may own a shard, a node not alive counted "
        "at level 1; blockers say why finalize to build_level would be refused now; "
        "raised_ms is Unix time in ms (0: never raised)."),
    "upgrade finalize": typed(
        UpgradeFinalize,
        note="result is RAISED, UNCHANGED (already at that level) or DRY_RUN; late names "
        "nodes below the level that joined while it was being raised. Exit status 1 when a "
        "node, or this build, supports less than the level asked for, or it would lower "
        "the level."),
}


def json_doc(command: str) -> JsonDoc | None:
    """The entry for ``command`` (its words after ``nereus``, e.g. ``"lane list"``)."""
    return JSON_KEYS.get(command)
