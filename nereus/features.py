"""Feature levels: which formats a cluster (or one home) may write (``docs/formats.md``).

A level names a set of formats, record kinds and fields. Level 1 is exactly what release
0.1.0 writes. A build *reads* every level up to ``SUPPORTED_LEVEL`` and *writes* only what
the level in force allows; the level in force is raised by ``nereus upgrade finalize``
once every node that owns or may own a shard supports the new one (Kafka's
``metadata.version``, CockroachDB's cluster version). A node whose build supports less
than the level in force refuses to join, naming both.

Level 2 is the first level above 0.1.0's: its shard owners append one turn's admissions
and outcomes as one PUBLISH_BATCH record (``nereus.records.batch``; at level 1 each is a
record of its own, as 0.1.0 writes them), and its clusters keep route evidence keys only
sealed under the nodes' sealing key (``SealedRouteKey``; at level 1 in plain text, which a
0.1.0 node reads). ``TEST_LEVEL`` is a level no release has: one
field behind it (QUERY_BARRIER's ``label``) shows the gate both ways at the top of the
range. A build claims it only when its shell is told to (``NEREUS_FEATURE_LEVEL_TESTING=1``,
tests only).
"""

from __future__ import annotations

import re
from typing import Final

from nereus.errors import ExitCode, NereusError

BASE_LEVEL: Final = 1  # what 0.1.0 writes, and the level of a cluster that never raised it
SUPPORTED_LEVEL: Final = 2  # the highest level this build reads and writes
PUBLISH_BATCH_LEVEL: Final = 2  # PUBLISH_BATCH records (module docstring)
SEALED_KEYS_LEVEL: Final = 2  # route evidence keys sealed in the coordinator (sealed-keys/)
INCREMENTAL_CHECKPOINT_LEVEL: Final = 2  # checkpoint manifest format 3 (shared files)
TEST_LEVEL: Final = 3  # a test-only level (module docstring)

LEVELS: Final = {
    1: "0.1.0: record format 2, key schema 1, digest 2, checkpoint manifest 2",
    2: "level 1, PUBLISH_BATCH records (one turn's admissions and outcomes in one record) "
       "and route evidence keys sealed in the coordinator (sealed-keys/), incremental "
       "checkpoints (manifest format 3)",
    3: "test only: level 2 and QUERY_BARRIER carries a label",
}


class FeatureLevelError(NereusError):
    """A level this build, or some node, cannot take (the answer is no, exit 1)."""

    exit_code = ExitCode.NO


def supported_level(*, testing: bool = False) -> int:
    """The highest level this build claims (``TEST_LEVEL`` when testing)."""
    return TEST_LEVEL if testing else SUPPORTED_LEVEL


def describe(level: int) -> str:
    """One line saying what ``level`` allows."""
    return LEVELS.get(level, "unknown to this build")


def check_can_run(*, level: int, supported: int, build: str, who: str,
                  where: str = "the cluster") -> None:
    """Raise unless a build supporting ``supported`` may run at ``level`` (a downgrade
    below what has been written is refused, naming both)."""
    if level > supported:
        raise FeatureLevelError(
            f"{who} runs build {build or 'unknown'}, which supports feature level "
            f"{supported}; {where} is at feature level {level}",
            hint="run a build that supports this level (a level is never lowered)")


def finalize_blockers(target: int, supported_by_node: dict[str, int]) -> list[str]:
    """Why the level cannot be raised to ``target`` now: each node that supports less
    (``supported_by_node``: every node that owns or may own a shard)."""
    return [f"node {node} supports feature level {level}, below {target}"
            for node, level in sorted(supported_by_node.items()) if level < target]


_FEATURES_TABLE: Final = re.compile(r"(?ms)^\[features\]\n(?:(?!\[)[^\n]*\n?)*")


def with_features(toml: str, level: int) -> str:
    """A configuration's text with ``[features] level = LEVEL`` (replacing any): the table
    0.1.0 refuses, so a build that knows no levels does not run what a level was raised on."""
    kept = _FEATURES_TABLE.sub("", toml).rstrip("\n")
    return f"{kept}\n\n[features]\nlevel = {level}\n"
