"""Shard Log records: a versioned envelope and every kind of DESIGN section 4.

Client Commands (``client``), System Mutations (``system``), Operator Mutations
(``operator``), their vocabularies (``vocabulary``) and the canonical codec (``codec``).
"""

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
    ShardPause,
    ShardResume,
    ShardRetention,
)
from nereus.records.system import (
    ActivationBarrier,
    CheckpointMark,
    ClaimResult,
    PublishAdmission,
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
    "PublishOutcome",
    "QueryBarrier",
    "Record",
    "Reschedule",
    "Resolution",
    "ResultStatus",
    "RetainBackfill",
    "RouteIdentity",
    "Schedule",
    "ShardPause",
    "ShardResume",
    "ShardRetention",
    "Sweep",
    "SystemMutation",
    "decode",
    "encode",
    "kind_of",
]
