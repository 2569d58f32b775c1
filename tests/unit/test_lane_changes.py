"""What a new configuration changes for a running engine's lanes: added lanes and policy
changes apply at once, destination changes and removals need a restart."""

from __future__ import annotations

from nereus.config import parse_config
from nereus.engine.process.lane_changes import lane_changes

BASE = """
[routes.default]
log = "kafka"
[lanes.a]
destination = "pulsar"
handoff = "deliver_at"
lead_ms = 1000
[lanes.b]
destination = "file"
path = "b.jsonl"
"""


def test_added_policy_and_restart_are_told_apart() -> None:
    """A new lane is added; a changed lead is policy; a changed path and a removed lane need
    a restart; the same text changes nothing."""
    old = parse_config(BASE)
    assert not lane_changes(old, parse_config(BASE))
    new = parse_config(BASE.replace("lead_ms = 1000", "lead_ms = 2000")
                       .replace('path = "b.jsonl"', 'path = "b2.jsonl"')
                       + '[lanes.c]\ndestination = "file"\npath = "c.jsonl"\n')
    changes = lane_changes(old, new)
    assert (changes.added, changes.policy, changes.needs_restart) == (["c"], ["a"], ["b"])
    gone = parse_config(BASE.split("[lanes.b]", maxsplit=1)[0])
    assert lane_changes(old, gone).needs_restart == ["b"]
