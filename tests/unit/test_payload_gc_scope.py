"""Where payload collection may judge: only on a home that holds every shard of its routes.
A node of a cluster sees its own shards only, so an object another node still needs would
look unreferenced there; it is refused before anything is listed or read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.adapters.objectstore.local import LocalObjectStore
from nereus.adapters.objectstore.protocol import ObjectInfo
from nereus.adapters.payload_gc import judge_all
from nereus.config import parse_config
from nereus.errors import UsageError
from nereus.layout import HomeLayout

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
