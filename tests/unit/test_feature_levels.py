"""Feature levels (``nereus.features``): a field behind a level is written and read only
at that level, both ways; the cluster's level is raised only when every node that owns or
may own a shard supports it, and a node below the level refuses to join, naming both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import open_cluster, sqlite_url
from nereus.adapters.cluster.feature_levels import raise_level, read_level, refuse_below_level
from nereus.cluster.records import Member
from nereus.features import BASE_LEVEL, SUPPORTED_LEVEL, TEST_LEVEL, FeatureLevelError
from nereus.machine.apply import apply
from nereus.records import QueryBarrier, ResultStatus, decode, encode
from nereus.records.codec import DecodeFailure, encode_at
from nereus.state.view import EmptyView

LEVEL_1_BARRIER = bytes.fromhex("4e5202") + b"\x82\xa4kind\xadQUERY_BARRIER\xaacommand_id\xa1c"


def test_a_record_without_the_gated_field_keeps_its_level_1_bytes() -> None:
    """The field behind the test level is absent from the bytes when unset: records a
    0.1.0 build wrote and reads are byte for byte what this build writes at level 1."""
    assert encode(QueryBarrier(command_id="c")) == LEVEL_1_BARRIER
    assert encode_at(QueryBarrier(command_id="c"), BASE_LEVEL) == LEVEL_1_BARRIER
    assert decode(LEVEL_1_BARRIER, level=BASE_LEVEL) == QueryBarrier(command_id="c")


def test_the_gate_refuses_the_field_below_its_level_and_takes_it_at_it() -> None:
    """Both ways: at level 1 writing the test-level field raises (naming field and levels)
    and reading it is UNSUPPORTED_FEATURE; at the test level it is written and read back."""
    labelled = QueryBarrier(command_id="c", label="drill")
    with pytest.raises(FeatureLevelError, match=r"QUERY_BARRIER.label needs feature level 3"):
        encode_at(labelled, BASE_LEVEL)
    data = encode_at(labelled, TEST_LEVEL)
    refused = decode(data, level=BASE_LEVEL)
    assert isinstance(refused, DecodeFailure)
    assert (refused.reason, refused.field) == ("UNSUPPORTED_FEATURE", "label")
    assert decode(data, level=TEST_LEVEL) == labelled


def test_decoding_stays_strict_at_the_higher_level() -> None:
    """A corrupt or non-canonical labelled record is still refused at level 2."""
    data = encode_at(QueryBarrier(command_id="c", label="x"), TEST_LEVEL)
    assert isinstance(decode(data[:-1], level=TEST_LEVEL), DecodeFailure)
    unknown = data.replace(b"\xa5label", b"\xa5lobel")
    assert isinstance(decode(unknown, level=TEST_LEVEL), DecodeFailure)


def test_apply_rejects_a_field_above_the_builds_level() -> None:
    """A shard of this build (level 2) REJECTS a record carrying the test-level field, with
    the reason and field, instead of applying it: every replica decides the same."""
    assert BASE_LEVEL < SUPPORTED_LEVEL < TEST_LEVEL
    view = EmptyView()
    applied = apply(view, encode_at(QueryBarrier(command_id="c", label="x"), TEST_LEVEL),
                    position=0, broker_ms=1)
    assert applied.result.status is ResultStatus.REJECTED
    assert (applied.result.reason, applied.result.field) == ("UNSUPPORTED_FEATURE", "label")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ClusterStore]:
    handle = open_cluster(sqlite_url(tmp_path / "c.db", "levels"))
    yield ClusterStore(handle)
    handle.coordinator.close()


def _member(node: str, level: int) -> Member:
    return Member(node_id=node, host="h", address="a", version=f"build-{level}",
                  feature_level=level)


def test_finalize_waits_for_every_node_then_refuses_a_lower_join(store: ClusterStore) -> None:
    """The level stays 1 while a live node supports only 1 (naming it); once every node
    supports 3 it is raised; then a node of a level-1 build refuses to join, naming its
    build and the cluster's level; the level is never lowered."""
    session = store.handle.coordinator.create_session(5_000, client_identity="t")
    store.register(session, _member("n1", TEST_LEVEL))
    old = store.handle.coordinator.create_session(5_000, client_identity="t2")
    store.register(old, _member("n2", BASE_LEVEL))
    with pytest.raises(FeatureLevelError, match="node n2 supports feature level 1, below 3"):
        raise_level(store, TEST_LEVEL, operator="op", reason="r", now_ms=1)
    assert read_level(store).level.level == BASE_LEVEL
    old.close()
    record, late = raise_level(store, TEST_LEVEL, operator="op", reason="all on 3", now_ms=2)
    assert (record.level, late, read_level(store).level.raised_by) == (TEST_LEVEL, [], "op")
    again = store.handle.coordinator.create_session(5_000, client_identity="t3")
    comer = _member("n3", BASE_LEVEL)
    store.register(again, comer)
    with pytest.raises(FeatureLevelError,
                       match="node n3 runs build build-1, which supports feature level 1; "
                       "the cluster is at feature level 3"):
        refuse_below_level(store, comer)
    with pytest.raises(FeatureLevelError, match="never lowered"):
        raise_level(store, BASE_LEVEL, operator="op", reason="r", now_ms=3)


def test_the_raised_level_is_written_into_the_configuration_too(store: ClusterStore) -> None:
    """0.1.0 nodes know no levels: the raise writes ``[features] level = 3`` into the
    cluster's configuration (audited), a table such a node refuses, while this build
    reads the configuration as before."""
    from nereus.config import parse_config

    toml = '[routes.r]\nlog = "kafka"\nbootstrap = "b:1"\n\n[shard]\nmax_headers = 9\n'
    store.write_config(toml, changed_by="t", reason="first", now_ms=1, expected=None)
    raise_level(store, TEST_LEVEL, operator="op", reason="upgraded", now_ms=2)
    written = store.require_config()
    assert written.toml.endswith("\n[features]\nlevel = 3\n") and written.revision == 2
    assert "max_headers = 9" in written.toml and store.audit()[-1].summary == \
        "[features] level = 3"
    assert parse_config(written.toml).limits.max_headers == 9
