"""The shard state machine: ``apply`` and the handlers it dispatches to."""

from nereus.machine.apply import Applied, apply, dedup_key
from nereus.machine.control import precondition_digest
from nereus.machine.limits import DEFAULT_LIMITS, Limits
from nereus.machine.reasons import Reason

__all__ = ["DEFAULT_LIMITS", "Applied", "Limits", "Reason", "apply", "dedup_key",
           "precondition_digest"]
