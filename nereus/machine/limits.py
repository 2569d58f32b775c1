"""Limits the state machine enforces (``nereus.records.limits``, where they are defined
with the SHARD_LIMITS record that replicates them); re-exported for the machine's users."""

from __future__ import annotations

from nereus.records.limits import DEFAULT_LIMITS, Limits, Positive

__all__ = ["DEFAULT_LIMITS", "Limits", "Positive"]
