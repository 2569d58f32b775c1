"""Shard Log records: a versioned envelope and every kind of DESIGN section 4.

Client Commands (``client``), System Mutations (``system``), Operator Mutations
(``operator``), their vocabularies (``vocabulary``) and the canonical codec (``codec``).

The names are loaded on first use (PEP 562): importing one submodule (the state's
enums from ``vocabulary``) does not load the codec and every record kind, which
``nereus shard inspect`` would pay at every start for nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from nereus.records.client import (
        Cancel,
        PayloadCommit,
        PayloadReserve,
        QueryBarrier,
        Reschedule,
        Schedule,
    )
    from nereus.records.codec import (
        ALL_KINDS,
        FORMAT_VERSION,
        ClientCommand,
        DecodeFailure,
        OperatorMutation,
        Record,
        SystemMutation,
        decode,
        encode,
        kind_of,
    )
    from nereus.records.operator import (
        AttemptResolve,
        LaneConfig,
        LaneGate,
        LaneLimits,
        MessageBreak,
        ShardLimits,
        ShardPause,
        ShardResume,
        ShardRetention,
    )
    from nereus.records.system import (
        ActivationBarrier,
        CheckpointMark,
        ClaimResult,
        PublishAdmission,
        PublishBatch,
        PublishOutcome,
        RetainBackfill,
        RouteIdentity,
        Sweep,
    )
    from nereus.records.vocabulary import (
        AttemptState,
        ClaimDisposition,
        Disposition,
        Gate,
        MessageState,
        Outcome,
        Resolution,
        ResultStatus,
    )

# each public name -> the submodule that defines it
_SOURCES: Final = {
    "ALL_KINDS": "codec",
    "FORMAT_VERSION": "codec",
    "ActivationBarrier": "system",
    "AttemptResolve": "operator",
    "AttemptState": "vocabulary",
    "Cancel": "client",
    "CheckpointMark": "system",
    "ClaimDisposition": "vocabulary",
    "ClaimResult": "system",
    "ClientCommand": "codec",
    "DecodeFailure": "codec",
    "Disposition": "vocabulary",
    "Gate": "vocabulary",
    "LaneConfig": "operator",
    "LaneGate": "operator",
    "LaneLimits": "operator",
    "MessageBreak": "operator",
    "MessageState": "vocabulary",
    "OperatorMutation": "codec",
    "Outcome": "vocabulary",
    "PayloadCommit": "client",
    "PayloadReserve": "client",
    "PublishAdmission": "system",
    "PublishBatch": "system",
    "PublishOutcome": "system",
    "QueryBarrier": "client",
    "Record": "codec",
    "Reschedule": "client",
    "Resolution": "vocabulary",
    "ResultStatus": "vocabulary",
    "RetainBackfill": "system",
    "RouteIdentity": "system",
    "Schedule": "client",
    "ShardLimits": "operator",
    "ShardPause": "operator",
    "ShardResume": "operator",
    "ShardRetention": "operator",
    "Sweep": "system",
    "SystemMutation": "codec",
    "decode": "codec",
    "encode": "codec",
    "kind_of": "codec",
}

__all__ = [
    "ALL_KINDS",
    "FORMAT_VERSION",
    "ActivationBarrier",
    "AttemptResolve",
    "AttemptState",
    "Cancel",
    "CheckpointMark",
    "ClaimDisposition",
    "ClaimResult",
    "ClientCommand",
    "DecodeFailure",
    "Disposition",
    "Gate",
    "LaneConfig",
    "LaneGate",
    "LaneLimits",
    "MessageBreak",
    "MessageState",
    "OperatorMutation",
    "Outcome",
    "PayloadCommit",
    "PayloadReserve",
    "PublishAdmission",
    "PublishBatch",
    "PublishOutcome",
    "QueryBarrier",
    "Record",
    "Reschedule",
    "Resolution",
    "ResultStatus",
    "RetainBackfill",
    "RouteIdentity",
    "Schedule",
    "ShardLimits",
    "ShardPause",
    "ShardResume",
    "ShardRetention",
    "Sweep",
    "SystemMutation",
    "decode",
    "encode",
    "kind_of",
]


def __getattr__(name: str) -> Any:
    """A public name, loaded from its submodule on first use (PEP 562)."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{source}"), name)
    globals()[name] = value
    return value
