"""``ShardStore.scan_prefix`` stops at the end of its prefix, whatever follows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity

IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)


@pytest.mark.parametrize("message_id", ["m1", "order-7", "a-much-longer-message-id-0001"])
def test_a_prefix_scan_never_reads_into_the_next_family(tmp_path: Path,
                                                        message_id: str) -> None:
    """A message's attempt number, then a ``retain`` key (the next family): the scan of the
    message's ``msgattempt`` prefix yields only its own key, every time (the upper bound
    once pointed into a temporary freed before the scan ran, and the scan read on)."""
    with ShardStore.open(tmp_path / "db", identity=IDENTITY, create=True) as store:
        store.write({keys.msg_attempt_key(message_id, 1): b"a1",
                     keys.retain_key(10**12, keys.RETAIN_MESSAGE, message_id): b"\x00" * 8})
        for _ in range(50):
            assert list(store.scan_prefix(keys.msg_attempt_prefix(message_id))) == [
                (keys.msg_attempt_key(message_id, 1), b"a1")]


class _IgnoresBounds:
    """A database whose iterator ignores the upper bound, as a dangling one did."""

    def __init__(self, data: dict[bytes, bytes]) -> None:
        self.data = data

    def items(self, *, from_key: bytes, read_opt: object) -> list[tuple[bytes, bytes]]:
        return sorted((k, v) for k, v in self.data.items() if k >= from_key)


def test_a_scan_checks_its_end_itself(tmp_path: Path) -> None:
    """Even when the database's own upper bound does not hold, ``scan`` stops at ``end``."""
    with ShardStore.open(tmp_path / "db", identity=IDENTITY, create=True) as store:
        real = store._db
        store._db = _IgnoresBounds({keys.msg_attempt_key("m1", 1): b"a1",
                                    keys.retain_key(1, keys.RETAIN_MESSAGE, "m1"): b""})
        try:
            assert [k for k, _ in store.scan_prefix(keys.msg_attempt_prefix("m1"))] == [
                keys.msg_attempt_key("m1", 1)]
        finally:
            store._db = real


def test_a_lazy_open_reads_what_a_full_open_reads(tmp_path: Path) -> None:
    """``lazy_indexes`` (``shard inspect``'s open: indexes and filters read as reads need
    them) gives the same report, point reads and scans as the default open, over several
    SST files and a write-ahead log not yet flushed."""
    from nereus.inspection import inspect_store

    path = tmp_path / "db"
    with ShardStore.open(path, identity=IDENTITY, create=True) as store:
        for round_ in range(3):
            store.write({keys.msg_key(f"m{round_}-{n}"): b"v" * 50 for n in range(200)})
            store.write({keys.retain_key(10**12 + n, keys.RETAIN_MESSAGE, f"m{round_}-{n}"):
                         b"\x00" * 8 for n in range(0, 200, 7)})
            store.compact()
        store.write({keys.msg_key("in-the-wal"): b"w"})
    with ShardStore.open(path, read_only=True) as full, \
            ShardStore.open(path, read_only=True, lazy_indexes=True) as lazy:
        assert len(full.files()) >= 1
        assert inspect_store(lazy) == inspect_store(full)
        assert lazy.get(keys.msg_key("in-the-wal")) == b"w"
        assert lazy.get(keys.msg_key("m1-5")) == full.get(keys.msg_key("m1-5")) == b"v" * 50
        assert list(lazy.scan_prefix(keys.RETAIN)) == list(full.scan_prefix(keys.RETAIN))
