"""Apply never raises on a record whose integer fields hold the extremes MessagePack
carries (a hostile or hand-written record in the log): a record apply cannot finish stops
the shard on every replay, so each is either applied or REJECTED with a reason."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nereus import records as r
from nereus.records.codec import CLIENT_COMMANDS, OPERATOR_MUTATIONS, SYSTEM_MUTATIONS
from nereus.testing import MemoryShard
from tests.unit.builders import activate, cancel, schedule

EXTREMES = (0, 1, -1, 2**31, 2**53, 10**13, 2**63 - 1, -(2**63), 2**64 - 1)
WORDS = ("m1", "local", "owner-a", "a1", "payloads/default/0/p1", "c" * 64)
ENTRIES = (b"", b"\x0b" + b"\x00" * 8 + b"rc/q", b"\x0b" + b"\xff" * 8 + b"j7")
BROKER_MS = (10**12, 10**12 + 10**7, 2**63 - 1)


def value_of(kind: msgspec.inspect.Type) -> st.SearchStrategy[Any]:
    """Values of one field's type, its integers the extremes (and a few ordinary ones)."""
    inspect = msgspec.inspect
    if isinstance(kind, inspect.IntType):
        return st.sampled_from(EXTREMES)
    if isinstance(kind, inspect.StrType):
        return st.sampled_from(WORDS)
    if isinstance(kind, inspect.BoolType):
        return st.booleans()
    if isinstance(kind, inspect.NoneType):
        return st.none()
    if isinstance(kind, inspect.EnumType):
        return st.sampled_from(list(kind.cls))
    if isinstance(kind, inspect.BytesType):
        return st.sampled_from(ENTRIES)
    if isinstance(kind, inspect.VarTupleType):
        return st.lists(value_of(kind.item_type), max_size=2).map(tuple)
    if isinstance(kind, inspect.DictType):
        return st.just({"k": "v"})
    if isinstance(kind, inspect.UnionType):
        return st.one_of([value_of(t) for t in kind.types if type(t).__name__ != "UnsetType"])
    if isinstance(kind, inspect.StructType):  # a record's nested value (SHARD_LIMITS)
        return records_of(kind.cls)
    raise AssertionError(f"no values for {kind}")  # a new field type: teach this test


def records_of(cls: type[Any]) -> st.SearchStrategy[Any]:
    """Records of ``cls``; an operator mutation mostly without a precondition (one that
    does not match is refused before the fields this test is about are read)."""
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    fields = {f.name: st.none() | value_of(f.type) if f.name == "precondition_digest"
              else value_of(f.type) for f in info.fields}
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


KINDS = (*CLIENT_COMMANDS, *SYSTEM_MUTATIONS, *OPERATOR_MUTATIONS)
ANY_RECORD = st.one_of([records_of(cls) for cls in KINDS])


@pytest.mark.parametrize("kind", KINDS, ids=lambda cls: cls.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_records_with_extreme_integers_are_applied_or_rejected(
        kind: type[Any], data: st.DataObject) -> None:
    """On a shard with an owner and a scheduled message in lane ``local``, a record of
    each kind (its integers from -2**63 to 2**64-1), a few records of any kind, and a
    CANCEL of the message (which ends it, so a lane's retention is used) each apply at
    broker times up to 2**63-1 without an exception and leave a result with a status."""
    shard = MemoryShard()
    activate(shard)
    shard.apply(schedule("m1", 10**12 + 5_000), broker_ms=10**12)
    records = [data.draw(records_of(kind)),
               *data.draw(st.lists(ANY_RECORD, max_size=3)), cancel("m1")]
    for record in records:
        result = shard.result(r.encode(record), broker_ms=data.draw(st.sampled_from(BROKER_MS)))
        assert result.status in set(r.ResultStatus), result
