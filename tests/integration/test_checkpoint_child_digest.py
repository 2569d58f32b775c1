"""A checkpoint's digest computed in a child interpreter, off the engine's GIL."""

from __future__ import annotations

import pytest

from nereus.adapters.offline import checkpoint_take
from nereus.adapters.offline.log_replay import store_digest
from nereus.state.store import ShardStore
from nereus.testing import MemoryShard
from tests.integration.stores import Build
from tests.unit.builders import schedule


def _store_of(store_from: Build, messages: int) -> ShardStore:
    shard = MemoryShard()
    for i in range(messages):
        shard.apply(schedule(f"m{i:04}", 1_000 + i))
    return store_from(shard)


def test_the_child_computes_the_digest_this_process_computes(store_from: Build) -> None:
    """The digest of an image by a child interpreter equals the digest computed here."""
    store = _store_of(store_from, 300)
    assert checkpoint_take._digest_in_a_child(store.path) == store_digest(store)


def test_a_child_that_cannot_run_leaves_the_digest_to_this_process(
        store_from: Build, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the child fails, the digest is computed here, with the same value."""
    store = _store_of(store_from, 50)
    expected = store_digest(store)

    def fails(*_: object, **__: object) -> str:
        raise RuntimeError("digest worker exited 1: no interpreter")

    monkeypatch.setattr(checkpoint_take, "process_digest", fails)
    assert checkpoint_take._digest_in_a_child(store.path) == expected


def test_only_a_large_image_goes_to_a_child(store_from: Build,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the size where starting a child costs more than the digest, it stays here."""
    store = _store_of(store_from, 20)
    assert checkpoint_take._small(store.path)
    monkeypatch.setattr(checkpoint_take, "SMALL_CHECKPOINT", 1)
    assert not checkpoint_take._small(store.path)
