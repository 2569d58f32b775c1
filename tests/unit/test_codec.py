"""The canonical record codec: round trips, canonical bytes, and decoding that never raises."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from nereus import records as r
from nereus.records.codec import HEADER, DecodeFailure, decode, encode
from tests.strategies import any_record


@given(any_record)
def test_round_trip_gives_the_same_record(record: r.Record) -> None:
    """decode(encode(x)) == x for every record kind."""
    assert decode(encode(record)) == record


@given(any_record)
def test_encoding_is_canonical(record: r.Record) -> None:
    """The same logical record always encodes to the same bytes, however it was built."""
    rebuilt = msgspec.convert(msgspec.to_builtins(record), type=type(record))
    assert encode(rebuilt) == encode(record)


@given(st.dictionaries(st.text(max_size=5), st.text(max_size=5), min_size=2, max_size=6))
def test_header_order_does_not_change_bytes(headers: dict[str, str]) -> None:
    """Headers given in any order encode identically (maps are sorted)."""
    forward = r.Schedule(command_id="c", delay_message_id="m", lane="l", deliver_at_ms=1,
                         action_at_ms=1, headers=dict(headers))
    backward = r.Schedule(command_id="c", delay_message_id="m", lane="l", deliver_at_ms=1,
                          action_at_ms=1, headers=dict(reversed(list(headers.items()))))
    assert encode(forward) == encode(backward)


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    """Any byte string decodes to a record or a DecodeFailure; nothing raises."""
    result = decode(data)
    assert isinstance(result, (DecodeFailure, *r.codec.CLIENT_COMMANDS, *r.codec.SYSTEM_MUTATIONS,
                               *r.codec.OPERATOR_MUTATIONS))


@given(any_record, st.data())
def test_truncated_records_fail_with_a_position(record: r.Record, data: st.DataObject) -> None:
    """A record cut short is MALFORMED and names the byte where it ran out."""
    raw = encode(record)
    cut = data.draw(st.integers(min_value=len(HEADER) + 1, max_value=len(raw) - 1))
    failure = decode(raw[:cut])
    assert isinstance(failure, DecodeFailure)
    assert failure.reason == "MALFORMED"
    assert failure.at_byte is not None and failure.at_byte <= cut


def test_bad_magic_names_byte_zero() -> None:
    """Bytes that are not a Nereus record are BAD_MAGIC at byte 0."""
    failure = decode(b"{}")
    assert isinstance(failure, DecodeFailure)
    assert (failure.reason, failure.at_byte) == ("BAD_MAGIC", 0)


def test_unknown_version_names_byte_two() -> None:
    """A record from a newer format is UNSUPPORTED_VERSION at byte 2, not misread."""
    raw = bytearray(encode(r.QueryBarrier(command_id="q")))
    raw[2] = 9
    failure = decode(bytes(raw))
    assert isinstance(failure, DecodeFailure)
    assert (failure.reason, failure.at_byte) == ("UNSUPPORTED_VERSION", 2)


def test_wrong_field_type_names_the_field() -> None:
    """A field of the wrong type is INVALID_FIELD naming the field path."""
    body = msgspec.msgpack.encode({"kind": "CANCEL", "command_id": 7, "delay_message_id": "m"})
    failure = decode(HEADER + body)
    assert isinstance(failure, DecodeFailure)
    assert failure.reason == "INVALID_FIELD"
    assert failure.field == "$.command_id"


def test_unknown_kind_is_rejected() -> None:
    """A kind this build does not know is INVALID_FIELD at $.kind."""
    failure = decode(HEADER + msgspec.msgpack.encode({"kind": "LAUNCH"}))
    assert isinstance(failure, DecodeFailure)
    assert failure.field == "$.kind"


def test_non_canonical_bytes_are_refused() -> None:
    """A record whose fields are reordered decodes but is refused as NON_CANONICAL."""
    body = msgspec.msgpack.encode({"delay_message_id": "m", "kind": "CANCEL", "command_id": "c"})
    failure = decode(HEADER + body)
    assert isinstance(failure, DecodeFailure)
    assert failure.reason == "NON_CANONICAL"


def test_every_design_kind_exists() -> None:
    """Every kind named in DESIGN section 4 has a record type (and LANE_LIMITS, a lane's
    limits on new work, and SWEEP and SHARD_RETENTION, retention, issue 15; SHARD_LIMITS,
    the replicated [shard] limits, issue 37)."""
    assert set(r.ALL_KINDS) == {
        "SCHEDULE", "CANCEL", "RESCHEDULE", "QUERY_BARRIER", "PAYLOAD_RESERVE", "PAYLOAD_COMMIT",
        "PUBLISH_ADMISSION", "PUBLISH_OUTCOME", "CLAIM_RESULT", "ACTIVATION_BARRIER",
        "CHECKPOINT_MARK", "LANE_GATE", "LANE_CONFIG", "LANE_LIMITS", "ATTEMPT_RESOLVE",
        "MESSAGE_BREAK",
        "SHARD_PAUSE", "SHARD_RESUME", "ROUTE_IDENTITY", "SWEEP", "SHARD_RETENTION",
        "RETAIN_BACKFILL", "SHARD_LIMITS", "PUBLISH_BATCH",
    }


def test_records_are_frozen() -> None:
    """Records are immutable values."""
    record = r.Cancel(command_id="c", delay_message_id="m")
    try:
        record.command_id = "other"  # type: ignore[misc]
    except AttributeError:
        return
    raise AssertionError("a record could be mutated")
