"""The Python client against the committed wire vectors (tests/vectors/wire.json,
docs/wire.md): each command prepared from a vector's input has exactly its bytes, command id
and partition; every plain record encodes to its bytes; each refused record is refused for
its reason; and the file is what ``python -m tests.vectors.build`` writes today (a change of
the wire format is a deliberate new vectors file, never a silent drift)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nereus.client.prepare import (
    Prepared,
    RouteRef,
    prepare_cancel,
    prepare_payload_commit,
    prepare_payload_reserve,
    prepare_reschedule,
    prepare_schedule,
)
from nereus.records import FORMAT_VERSION, QueryBarrier, decode, encode
from nereus.records.codec import DecodeFailure
from nereus.records.system import RouteIdentity
from nereus.shard import partition_for
from tests.vectors.build import build

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "wire.json"
DATA: dict[str, Any] = json.loads(VECTORS.read_text())
PREPARE: dict[str, Callable[..., Prepared]] = {
    "SCHEDULE": prepare_schedule, "CANCEL": prepare_cancel, "RESCHEDULE": prepare_reschedule,
    "PAYLOAD_RESERVE": prepare_payload_reserve, "PAYLOAD_COMMIT": prepare_payload_commit}


def _prepare(vector: dict[str, Any]) -> Prepared:
    route = RouteRef(name=vector["route"]["name"], partitions=vector["route"]["partitions"],
                     ordered_lanes=frozenset(vector["route"]["ordered_lanes"]))
    fields = dict(vector["input"])
    if "payload" in fields:
        fields["payload"] = base64.b64decode(fields["payload"])
    return PREPARE[vector["kind"]](route, **fields)


def test_the_vectors_file_is_what_the_builder_writes_today() -> None:
    """wire.json equals a fresh build: the format has not drifted from the frozen file, and
    the vectors speak of this build's record format version."""
    assert json.loads(json.dumps(build(), ensure_ascii=False)) == DATA
    assert DATA["wire_version"] == FORMAT_VERSION


@pytest.mark.parametrize("vector", DATA["commands"], ids=lambda v: v["name"])
def test_a_prepared_command_has_the_vectors_bytes_id_and_partition(
        vector: dict[str, Any]) -> None:
    """Prepared from the vector's input: the exact record bytes, command id and partition;
    and the bytes decode back to a record that encodes to themselves."""
    prepared = _prepare(vector)
    assert prepared.data.hex() == vector["record_hex"]
    assert prepared.command_id == vector["command_id"]
    assert prepared.shard.partition == vector["partition"]
    decoded = decode(bytes.fromhex(vector["record_hex"]))
    assert not isinstance(decoded, DecodeFailure) and encode(decoded) == prepared.data


def test_plain_records_encode_to_their_bytes() -> None:
    """The query barrier and the route identity records of the vectors."""
    made = {"QUERY_BARRIER": QueryBarrier, "ROUTE_IDENTITY": RouteIdentity}
    for vector in DATA["records"]:
        record = made[vector["kind"]](**vector["input"])
        assert encode(record).hex() == vector["record_hex"], vector["name"]


def test_partitions_are_the_blake2b_hash_of_the_utf8_key() -> None:
    """Each (key, partition count) of the vectors hashes to its partition."""
    for case in DATA["partitions"]:
        assert partition_for(case["key"], case["partitions"]) == case["partition"], case


@pytest.mark.parametrize("vector", DATA["refused"], ids=lambda v: v["name"])
def test_refused_records_are_refused_for_their_reason(vector: dict[str, Any]) -> None:
    """Bytes a shard must refuse: the decoder names the vector's reason (and byte)."""
    failure = decode(bytes.fromhex(vector["record_hex"]))
    assert isinstance(failure, DecodeFailure)
    assert failure.reason == vector["reason"]
    if vector["at_byte"] is not None:
        assert failure.at_byte == vector["at_byte"]
