"""State schema migrations at open (``nereus.state.migrations``): one synced batch per step,
the digest of a migrated shard equal to the new build's own, a newer schema refused as a
downgrade. 0.1.0's schema 1 is the only one, so a test step 1 -> 2 stands in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.errors import StoreError
from nereus.state import keys, migrations
from nereus.state.digest import digest_sorted
from nereus.state.migrations import Migration, Reader, Scanner, SchemaRefused
from nereus.state.store import ShardStore
from nereus.state.values import Identity

DATA = {keys.msg_key("m1"): b"\x01", keys.lane_key("local"): b"\x02",
        keys.claim_key("m1"): b"\x03"}
RUNTIME_KEY = keys.SCHED + b"cursor"  # local runtime state a step may rewrite


def _identity(version: int) -> Identity:
    return Identity(route="default", partition=0, schema_version=version)


def _made(path: Path, version: int) -> None:
    """A database stamped at ``version`` with ``DATA`` in it."""
    with ShardStore.open(path, identity=_identity(version), create=True) as store:
        store.write(DATA)


def _step(read: Reader, scan: Scanner) -> dict[bytes, bytes | None]:
    """Schema 2 keeps the replicated meaning; it moves runtime state (claims) aside."""
    moved: dict[bytes, bytes | None] = {}
    for key, value in scan(keys.CLAIM, keys.prefix_end(keys.CLAIM)):
        moved[key] = None
        moved[RUNTIME_KEY + key] = value
    return moved


@pytest.fixture
def schema_2(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A build whose schema is 2, with the step from 1."""
    monkeypatch.setattr(keys, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(migrations.MIGRATIONS, 1, Migration(1, "claims aside", _step))
    yield


def test_an_older_schema_is_migrated_at_open_with_the_digest_of_the_new_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A schema 1 database opened by a schema 2 build is migrated in one batch (schema in
    meta and identity, the step's writes); its digest equals that of the same state
    written by the schema 2 build itself, and opening it again runs nothing."""
    _made(tmp_path / "old", 1)
    monkeypatch.setattr(keys, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(migrations.MIGRATIONS, 1, Migration(1, "claims aside", _step))
    with ShardStore.open(tmp_path / "old", identity=_identity(2)) as store:
        identity = store.identity()
        assert identity is not None and identity.schema_version == 2
        assert store.get(keys.claim_key("m1")) is None
        assert store.get(RUNTIME_KEY + keys.claim_key("m1")) == b"\x03"
        migrated = digest_sorted(store.replicated())
    _made(tmp_path / "new", 2)
    with ShardStore.open(tmp_path / "new", identity=_identity(2)) as store:
        assert digest_sorted(store.replicated()) == migrated
    monkeypatch.setitem(migrations.MIGRATIONS, 1, Migration(1, "must not run", _boom))
    ShardStore.open(tmp_path / "old", identity=_identity(2)).close()


def _boom(read: Reader, scan: Scanner) -> dict[bytes, bytes | None]:
    raise RuntimeError("the step failed before its batch")


def test_a_failed_step_leaves_the_database_at_its_old_schema(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that fails writes nothing: the database is still schema 1, whole."""
    _made(tmp_path / "db", 1)
    monkeypatch.setattr(keys, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(migrations.MIGRATIONS, 1, Migration(1, "fails", _boom))
    with pytest.raises(RuntimeError):
        ShardStore.open(tmp_path / "db", identity=_identity(2))
    monkeypatch.setattr(keys, "SCHEMA_VERSION", 1)
    with ShardStore.open(tmp_path / "db", identity=_identity(1), read_only=True) as store:
        identity = store.identity()
        assert identity is not None and identity.schema_version == 1
        assert store.get(keys.claim_key("m1")) == b"\x03"


def test_a_newer_schema_is_refused_as_a_downgrade(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build of schema 1 refuses a database a schema 2 build wrote, naming both."""
    monkeypatch.setattr(keys, "SCHEMA_VERSION", 2)
    _made(tmp_path / "db", 2)
    monkeypatch.setattr(keys, "SCHEMA_VERSION", 1)
    with pytest.raises(SchemaRefused, match="key schema 2 was written by a newer build; "
                       "this build reads schema 1"):
        ShardStore.open(tmp_path / "db", identity=_identity(1))


def test_a_read_only_open_does_not_migrate(tmp_path: Path, schema_2: None) -> None:
    """Offline readers do not write: an older schema opened read-only says what to do."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keys, "SCHEMA_VERSION", 1)
        _made(tmp_path / "db", 1)
    with pytest.raises(StoreError, match="has key schema 1; this build reads 2") as refused:
        ShardStore.open(tmp_path / "db", identity=_identity(2), read_only=True)
    assert "nereus upgrade check" in (refused.value.hint or "")
