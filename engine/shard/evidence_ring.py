"""A route's evidence keys as this process holds them now (``EvidenceRing``).

Every shard of a route signs and checks destination evidence with the same keys; a
rotation (``nereus cluster rotate-evidence-key``) replaces them while the shards run: the
cluster node that sees it calls ``replace``, and each MAC made after that reads the new
keys. Replacing is one reference assignment, so a reader sees the old keys or the new,
never a mix.
"""

from __future__ import annotations

from nereus.evidence_mac import EvidenceKeys


class EvidenceRing:
    """The keys in force for one route in this process."""

    def __init__(self, keys: EvidenceKeys) -> None:
        self._keys = keys

    def __repr__(self) -> str:
        return f"EvidenceRing({self._keys!r})"

    @property
    def keys(self) -> EvidenceKeys:
        return self._keys

    def replace(self, keys: EvidenceKeys) -> None:
        self._keys = keys
