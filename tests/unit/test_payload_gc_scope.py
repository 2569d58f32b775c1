"""Where payload collection may judge. The whole home's judgement only on a home that holds
every shard of its routes: a node of a cluster sees its own shards only, so an object
another node still needs would look unreferenced there; it is refused before anything is
listed or read. A node judges its own shards' objects by their prefixes instead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.adapters.backends.objectstore.protocol import ObjectInfo
from nereus.adapters.offline.payload_collection import judge_all, judge_shards
from nereus.config import parse_config
from nereus.errors import UsageError
from nereus.layout import HomeLayout
from nereus.shard import ShardId

NODE = """
[routes.default]
log = "file"
partitions = 2

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"

[cluster]
coordinator = "sqlite:///var/tmp/nowhere.db/c1"
node_id = "n1"
"""


def test_a_cluster_node_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    """On node n1 the judgement raises a UsageError naming the node; the listing it was
    given is never consumed."""
    objects = LocalObjectStore(tmp_path / "objects")
    objects.put_bytes("payloads/default/0/anything", b"x")
    consumed: list[str] = []

    def listing() -> Iterator[ObjectInfo]:
        consumed.append("listed")
        yield from objects.list("payloads/")

    with pytest.raises(UsageError, match="node n1 of a cluster"):
        judge_all(parse_config(NODE), HomeLayout(tmp_path), objects, listing(), 0)
    assert consumed == []


def test_a_nodes_own_shards_are_judged_by_their_prefixes_alone(tmp_path: Path) -> None:
    """``judge_shards`` for the shard node n1 owns (default/0) lists and judges only the
    objects under ``payloads/default/0/``: its stray object is collected, and the objects
    of default/1 (another node's) and under no shard's prefix are not even listed."""
    objects = LocalObjectStore(tmp_path / "objects")
    for key in ("payloads/default/0/stray", "payloads/default/1/theirs",
                "payloads/elsewhere/custom"):
        objects.put_bytes(key, b"x")
    config = parse_config(NODE)
    verdicts, floors = judge_shards(config, HomeLayout(tmp_path), objects,
                                    [ShardId("default", 0)], 0)
    assert [(v.key, v.collect, v.reason) for v in verdicts] == [
        ("payloads/default/0/stray", True, "no payload stage in any shard")]
    assert [str(floor.shard) for floor in floors] == ["default/0"]
