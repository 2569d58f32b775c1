"""Route evidence keys kept sealed in the coordinator (feature level 2), on the real etcd
and Oxia: the coordinator holds no plain key, a node without the cluster's sealing key (or
with another one) is refused naming the setting, and a rotation keeps evidence signed with
the previous key verifying during its grace while new evidence uses the new key."""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import open_cluster
from nereus.adapters.cluster.evidence_seal import SealKey
from nereus.adapters.cluster.feature_levels import raise_level
from nereus.adapters.cluster.route_keys import install_route_keys, share_route_keys
from nereus.adapters.cluster.sealed_keys import RotationRefused, read_sealed, rotate
from nereus.adapters.home.route_secrets import evidence_keys, route_key
from nereus.cluster import keys
from nereus.cluster.records import RouteSecret
from nereus.errors import ConfigError
from nereus.evidence_mac import evidence_mac, mac_accepted
from nereus.features import SEALED_KEYS_LEVEL
from tests.integration.etcd_service import EtcdEndpoint, etcd_endpoint, etcd_service  # noqa: F401
from tests.integration.oxia_service import (  # noqa: F401
    OxiaEndpoint,
    oxia_endpoint,
    oxia_service,
)

ROUTE = "default"
HOUR_MS = 3_600_000


@pytest.fixture(params=["etcd", "oxia"])
def store(request: pytest.FixtureRequest) -> Iterator[ClusterStore]:
    """A fresh cluster (configured, one route) on the real etcd or Oxia."""
    name = f"sealed{uuid.uuid4().hex[:10]}"
    if request.param == "etcd":
        etcd: EtcdEndpoint = request.getfixturevalue("etcd_endpoint")
        url = f"etcd://{etcd.host}:{etcd.port}/{name}"
    else:
        oxia: OxiaEndpoint = request.getfixturevalue("oxia_endpoint")
        url = oxia.url(name)
    handle = open_cluster(url)
    cluster = ClusterStore(handle)
    cluster.write_config(f'[routes.{ROUTE}]\nlog = "file"\n', changed_by="test",
                         reason="sealed keys", now_ms=1, expected=None)
    try:
        yield cluster
    finally:
        handle.close()


def _raise(store: ClusterStore) -> None:
    raise_level(store, SEALED_KEYS_LEVEL, operator="test", reason="sealed keys", now_ms=2)


def _raw(store: ClusterStore) -> bytes:
    """Every record the cluster keeps in its coordinator that could hold a key, as stored
    (the ranges of ``secrets/``, ``sealed-keys/`` and the audit, the configuration)."""
    from nereus.coordination.records import prefix_range

    coordinator = store.handle.coordinator
    found = [coordinator.get(store.key(keys.CONFIG))]
    for prefix in (keys.SECRETS, keys.SEALED_KEYS, keys.AUDIT):
        found += coordinator.range_scan(*prefix_range(store.key(prefix)))
    return b"\n".join(r.key.encode() + b"=" + r.value for r in found)


def _forms(key: bytes) -> list[bytes]:
    return [key, key.hex().encode(), key.hex().upper().encode(), base64.b64encode(key)]


def test_the_coordinator_keeps_a_level_1_key_only_sealed_once_a_node_holding_the_sealing_key_starts(
        store: ClusterStore, tmp_path: Path) -> None:
    """At level 1 the key is plain (what 0.1.0 reads); from level 2 a node with the sealing
    key seals it, deletes the plain record, and installs the same key into its home: no
    form of the key is left in any record of the cluster."""
    seal_key = SealKey(os.urandom(32))
    assert share_route_keys(store, [ROUTE], now_ms=3, made_by="op") == [ROUTE]
    plain = bytes.fromhex(store.route_secrets()[ROUTE].evidence_key)
    _raise(store)
    assert share_route_keys(store, [ROUTE], now_ms=4, made_by="op") == []  # no sealing key
    assert store.route_secrets(), "an operator without the sealing key changes nothing"
    share_route_keys(store, [ROUTE], now_ms=5, made_by="node n1", seal_key=seal_key)
    assert store.route_secrets() == {}
    sealed = read_sealed(store, ROUTE)
    assert sealed is not None and sealed.record.key_id == seal_key.key_id
    raw = _raw(store)
    assert keys.sealed_key_key(ROUTE).encode() in raw
    assert not [form for form in _forms(plain) + _forms(seal_key.key) if form in raw]
    home = tmp_path / "n1"
    assert install_route_keys(store, home, [ROUTE], seal_key=seal_key) == [ROUTE]
    assert route_key(home, ROUTE, create=False) == plain


def test_a_fresh_route_at_level_2_is_sealed_from_its_first_write(store: ClusterStore) -> None:
    """At level 2 a route's first key is written sealed, never plain."""
    _raise(store)
    seal_key = SealKey(os.urandom(32))
    assert share_route_keys(store, [ROUTE], now_ms=3, made_by="n1", seal_key=seal_key) == \
        [ROUTE]
    assert store.route_secrets() == {} and read_sealed(store, ROUTE) is not None
    assert b'"evidence_key"' not in _raw(store)


def test_a_node_without_the_sealing_key_or_with_another_is_refused_naming_the_setting(
        store: ClusterStore, tmp_path: Path) -> None:
    """A node that cannot open the sealed key is refused with the setting to give it
    (and, with another key, both key ids), never a key in the message."""
    _raise(store)
    seal_key = SealKey(os.urandom(32))
    share_route_keys(store, [ROUTE], now_ms=3, made_by="n1", seal_key=seal_key)
    with pytest.raises(ConfigError, match=r"\[cluster\] evidence_seal_key_file is not set"):
        install_route_keys(store, tmp_path / "n2", [ROUTE])
    other = SealKey(os.urandom(32))
    with pytest.raises(ConfigError) as refused:
        install_route_keys(store, tmp_path / "n3", [ROUTE], seal_key=other)
    text = f"{refused.value} {refused.value.hint}"
    assert seal_key.key_id in text and other.key_id in text and "evidence_seal_key_file" in text
    assert not [f for f in _forms(seal_key.key) + _forms(other.key) if f in text.encode()]


def test_a_rotation_signs_with_the_new_key_and_the_previous_verifies_until_its_grace_ends(
        store: ClusterStore, tmp_path: Path) -> None:
    """After a rotation a node's home signs with the new key; a record signed with the
    previous key verifies until the grace ends and not after; a second rotation during the
    grace is refused (it would drop that key)."""
    _raise(store)
    seal_key = SealKey(os.urandom(32))
    share_route_keys(store, [ROUTE], now_ms=3, made_by="n1", seal_key=seal_key)
    home = tmp_path / "n1"
    install_route_keys(store, home, [ROUTE], seal_key=seal_key)
    old = route_key(home, ROUTE, create=False)
    signed_before = evidence_mac(old, "m1", 1, "a1")
    rotated = rotate(store, ROUTE, seal_key, now_ms=10, grace_ms=HOUR_MS, operator="op",
                     reason="scheduled")
    assert rotated.current.generation == 2 and rotated.previous_until_ms == 10 + HOUR_MS
    assert install_route_keys(store, home, [ROUTE], seal_key=seal_key) == [ROUTE]
    ring = evidence_keys(home, ROUTE, create=False)
    assert ring.current != old and ring.previous == old
    assert mac_accepted(signed_before, ring.expected(11, "m1", 1, "a1"))
    assert mac_accepted(evidence_mac(ring.current, "m1", 1, "a1"),
                        ring.expected(11, "m1", 1, "a1"))
    assert not mac_accepted(signed_before, ring.expected(10 + HOUR_MS, "m1", 1, "a1"))
    with pytest.raises(RotationRefused, match="verifies until"):
        rotate(store, ROUTE, seal_key, now_ms=12, grace_ms=HOUR_MS, operator="op", reason="x")
    assert not [f for f in _forms(old) + _forms(ring.current) if f in _raw(store)]


def test_without_any_sealing_key_a_level_2_route_still_gets_one_key_every_node_shares(
        store: ClusterStore, tmp_path: Path) -> None:
    """At level 2 with no node holding a sealing key, a route's first key is made plain
    (once: every node installs the same one, none makes its own); the first node with the
    sealing key seals it and deletes the plain record, and a plain one made meanwhile by a
    node without the key is deleted by the next that has it."""
    _raise(store)
    assert share_route_keys(store, [ROUTE], now_ms=3, made_by="n1") == [ROUTE]
    assert share_route_keys(store, [ROUTE], now_ms=3, made_by="n2") == []
    homes = [tmp_path / "n1", tmp_path / "n2"]
    for home in homes:
        install_route_keys(store, home, [ROUTE])
    first, second = (route_key(home, ROUTE, create=False) for home in homes)
    assert first == second
    seal_key = SealKey(os.urandom(32))
    share_route_keys(store, [ROUTE], now_ms=4, made_by="n3", seal_key=seal_key)
    assert store.route_secrets() == {}
    store.add_route_secret(RouteSecret(route=ROUTE, evidence_key=os.urandom(32).hex()))
    share_route_keys(store, [ROUTE], now_ms=5, made_by="n3", seal_key=seal_key)
    assert store.route_secrets() == {}
    assert install_route_keys(store, tmp_path / "n3", [ROUTE], seal_key=seal_key) == [ROUTE]
    assert route_key(tmp_path / "n3", ROUTE, create=False) == first


def test_a_sealed_key_copied_to_another_cluster_name_still_opens_and_under_another_route_not(
        store: ClusterStore) -> None:
    """``cluster migrate`` copies records under another cluster name: a sealed key still
    opens there; the same sealed bytes put under another route do not, nor garbled ones
    (a clear error, not a traceback)."""
    from nereus.adapters.cluster.sealed_keys import open_route_keys
    from nereus.cluster.records import SealedRouteKey, decode_record, encode_record
    from nereus.coordination.records import EXPECTED_RECORD_DOES_NOT_EXIST

    _raise(store)
    seal_key = SealKey(os.urandom(32))
    share_route_keys(store, [ROUTE], now_ms=3, made_by="n1", seal_key=seal_key)
    raw = store.handle.coordinator.get(store.key(keys.sealed_key_key(ROUTE))).value
    other = open_cluster(store.url + "moved")
    try:
        moved = ClusterStore(other)
        where = moved.key(keys.sealed_key_key(ROUTE))
        other.coordinator.put(where, raw, expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST)
        record = decode_record(other.coordinator.get(where).value, SealedRouteKey)
    finally:
        other.close()
    assert open_route_keys(record, seal_key).current
    with pytest.raises(ConfigError, match="does not open"):
        open_route_keys(decode_record(encode_record(
            msgspec.structs.replace(record, route="other")), SealedRouteKey), seal_key)
    garbled = msgspec.structs.replace(record.current, sealed="not base64 at all!")
    with pytest.raises(ConfigError, match="does not open"):
        open_route_keys(msgspec.structs.replace(record, current=garbled), seal_key)


def test_a_node_holding_the_previous_sealing_key_opens_old_records_and_seals_under_its_new(
        store: ClusterStore, tmp_path: Path) -> None:
    """While the sealing key is changed a node may hold the one before it too: it opens a
    record sealed under either, and a route it seals now is sealed under its current key."""
    _raise(store)
    old, new = os.urandom(32), os.urandom(32)
    share_route_keys(store, [ROUTE], now_ms=3, made_by="n1", seal_key=SealKey(old))
    both = SealKey(new, previous=old)
    assert both.key_ids == (SealKey(new).key_id, SealKey(old).key_id)
    assert old.hex() not in repr(both) and new.hex() not in repr(both)
    assert install_route_keys(store, tmp_path / "n2", [ROUTE], seal_key=both) == [ROUTE]
    share_route_keys(store, ["second"], now_ms=4, made_by="n2", seal_key=both)
    second = read_sealed(store, "second")
    assert second is not None and second.record.key_id == both.key_id


def test_a_reseal_keeps_keys_generations_and_grace_and_only_the_new_sealing_key_opens_it(
        store: ClusterStore) -> None:
    """Re-sealing a rotated route under a new sealing key keeps its evidence keys, their
    generations and the previous key's grace; the old sealing key no longer opens it (the
    refusal names both fingerprints and the setting); a re-seal from a stale read is
    refused, writing nothing."""
    from nereus.adapters.cluster.sealed_keys import open_route_keys, reseal

    _raise(store)
    old, new = SealKey(os.urandom(32)), SealKey(os.urandom(32))
    share_route_keys(store, [ROUTE], now_ms=3, made_by="n1", seal_key=old)
    rotate(store, ROUTE, old, now_ms=10, grace_ms=HOUR_MS, operator="op", reason="r")
    found = read_sealed(store, ROUTE)
    assert found is not None
    before = open_route_keys(found.record, old)
    done = reseal(store, found, before, new, now_ms=20, operator="op", reason="leaked")
    assert (done.key_id, done.resealed_by, done.reseal_reason) == (new.key_id, "op", "leaked")
    now = read_sealed(store, ROUTE)
    assert now is not None and now.record == done
    after = open_route_keys(now.record, new)
    assert (after.current, after.previous, after.generation, after.previous_until_ms) == \
        (before.current, before.previous, 2, 10 + HOUR_MS)
    with pytest.raises(ConfigError) as refused:
        open_route_keys(now.record, old)
    text = f"{refused.value} {refused.value.hint}"
    assert new.key_id in text and old.key_id in text and "evidence_seal_key_file" in text
    with pytest.raises(RotationRefused, match="changed while this ran"):
        reseal(store, found, before, SealKey(os.urandom(32)), now_ms=30, operator="op",
               reason="stale")
    assert read_sealed(store, ROUTE) == now
    assert not [f for f in _forms(before.current) + _forms(new.key) if f in _raw(store)]
