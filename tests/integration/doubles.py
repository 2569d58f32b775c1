"""Test doubles for the engine's seams: a Shard Log that delegates to a real one (tests
override what they disturb), and a destination base with nothing to probe or scan."""

from __future__ import annotations

from collections.abc import Mapping

from nereus.adapters.backends.shardlog.delegating import DelegatingLog
from nereus.evidence_mac import ExpectedMac

__all__ = ["DelegatingLog", "QuietDestination"]


class QuietDestination:
    """A destination with nothing to probe, no evidence to find and nothing to close;
    subclasses say how ``publish`` behaves."""

    name = "local"
    max_record_bytes: int | None = None

    def probe(self) -> str | None:
        return None

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass
