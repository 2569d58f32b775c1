"""A node of a cluster collects the large payloads of the shards it owns, and only those:
the objects under each owned shard's prefix, judged against that shard's state and log
tail, with the Recovery Floors from the coordinator's catalog. In-process nodes on the
embedded coordinator and one home's file Shard Logs, as ``test_cluster_node``."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import cast

import pytest

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.client import prepare_payload_commit, prepare_payload_reserve
from nereus.engine.process.engine_settings import EngineSettings
from nereus.payload_objects import object_key, shard_prefix
from nereus.shard import ShardId
from tests.integration.engine_harness import Events, Harness, now_ms
from tests.integration.test_cluster_node import PARTITIONS, cluster
from tests.polling import wait_until


@pytest.mark.timeout(90)
def test_each_node_collects_the_payloads_of_the_shards_it_owns(tmp_path: Path) -> None:
    """With two nodes holding two shards each, a stray object under every shard's prefix
    is deleted by the node that owns that shard and by no other; a committed payload and
    an object under no shard's prefix are kept through later rounds."""
    events = {"a": Events(), "b": Events()}
    with cluster(tmp_path, ["a", "b"], settings=EngineSettings(payload_gc_interval_s=0.3),
                 events=events) as c:
        wait_until("every shard active, two on each node", lambda: c.settled()
                   and c.held() == Counter({"a": 2, "b": 2}), 30, seen=c.owners)
        objects = LocalObjectStore(c.home / "objects")
        harness = Harness(c.home, c.nodes["a"].engine, PARTITIONS)
        data = b"a large payload, committed"
        sha = hashlib.sha256(data).hexdigest()
        home_shard = ShardId("default", 0)
        committed = object_key("default", 0, "kept")
        harness.queue([prepare_payload_reserve(
            harness.route, command_id="r1", delay_message_id="m1", payload_id="kept",
            size_bytes=len(data), sha256=sha, expires_at_ms=now_ms() + 3_600_000,
            shard=home_shard)])
        objects.put_bytes(committed, data)
        harness.queue([prepare_payload_commit(
            harness.route, command_id="c1", delay_message_id="m1", payload_id="kept",
            size_bytes=len(data), sha256=sha, object_key=committed, shard=home_shard)])
        harness.close()
        strays = {object_key("default", p, f"stray-{p}") for p in range(PARTITIONS)}
        for key in [*strays, "payloads/elsewhere/custom"]:
            objects.put_bytes(key, b"nobody reserved this")

        def left() -> set[str]:
            return {info.key for info in objects.list("payloads/")}

        wait_until("every stray object collected", lambda: not left() & strays, 30, seen=left)
        collectors = {node: c.nodes[node].engine.payloads for node in c.nodes}
        rounds = {node: collector.rounds for node, collector in collectors.items()
                  if collector is not None}
        assert rounds.keys() == {"a", "b"}
        wait_until("two more rounds on each node", lambda: all(
            collector is not None and collector.rounds >= rounds[node] + 2
            for node, collector in collectors.items()), 30)
        owners = c.owners()
    assert left() == {committed, "payloads/elsewhere/custom"}
    deleted_by = {node: {key for fields in events[node].named("payload_gc")
                         for key in cast(list[str], fields["keys"])} for node in events}
    assert deleted_by["a"] | deleted_by["b"] == strays
    for node, keys in deleted_by.items():
        mine = tuple(shard_prefix(s.route, s.partition) for s, (owner, _, _) in owners.items()
                     if owner == node)
        assert keys and all(key.startswith(mine) for key in keys), (node, keys, mine)
