"""Decode any stored key/value into plain data, for ``nereus shard dump``.

Every family of ``keys.py`` is decodable here without the engine: replicated families
with their typed Structs, local runtime families (claims, scheduler state) as untyped
MessagePack. Bytes that are not UTF-8 come out as ``{"base64": ...}``. One key/value is a
``DumpEntry``, the element of ``shard dump``'s ``--json`` entries.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from nereus.records.system import RouteIdentity
from nereus.state import keys
from nereus.state.values import (
    Activation,
    Attempt,
    CheckpointMarkValue,
    Identity,
    Lane,
    Message,
    Obligation,
    PayloadStage,
    Result,
    WorkRef,
    decode_int,
    decode_value,
)

_VALUE_TYPES: dict[str, type[Any]] = {
    "msg": Message, "timeline": WorkRef, "result": Result, "reject": Result,
    "attempt": Attempt, "obligation": Obligation, "lane": Lane, "payload": PayloadStage,
}
_META_TYPES: dict[bytes, type[Any]] = {
    keys.META_IDENTITY: Identity, keys.META_ACTIVATION: Activation,
    keys.META_CHECKPOINT_MARK: CheckpointMarkValue, keys.META_ROUTE: RouteIdentity,
}


def _json_safe(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def plain(value: Any) -> Any:
    """msgspec builtins with bytes as text (or ``{"base64": ...}`` when not UTF-8)."""
    return _json_safe(msgspec.to_builtins(value, builtin_types=(bytes,)))


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="backslashreplace")


class DumpEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One stored key/value, decoded: its family, the key's parts by name, and the value as
    plain data (a Struct's fields, an integer, text, or ``{"undecodable": ..., "base64":
    ...}`` when the bytes do not decode)."""

    family: str
    key: dict[str, str | int]
    value: object  # any JSON value: its shape is the family's (``keys.py``)


def decode_key(key: bytes) -> tuple[str, dict[str, str | int]]:
    """The family of ``key`` and its parts by name (lane, delay_message_id, position...)."""
    family = keys.FAMILY_BY_PREFIX.get(key[0], f"unknown-0x{key[0]:02x}")
    rest = key[1:]
    if family == "timeline":
        lane, action_at, mid = keys.split_timeline_key(key)
        return family, {"lane": lane, "action_at_ms": action_at, "delay_message_id": mid}
    if family == "reject":
        return family, {"position": int.from_bytes(rest, "big")}
    if family == "obligation":
        message, _, attempt = rest.partition(b"\x00")
        return family, {"delay_message_id": _text(message), "attempt_id": _text(attempt)}
    if family == "msgattempt":
        owner, _, number = rest.partition(b"\x00")
        return family, {"delay_message_id": _text(owner),
                        "attempt_no": int.from_bytes(number, "big")}
    if family == "retain":
        expire_at, kind, ident = keys.split_retain_key(key)
        return family, {"expire_at_ms": expire_at, "kind": _text(kind), "id": ident}
    names = {"meta": "name", "msg": "delay_message_id", "result": "dedup_key",
             "attempt": "attempt_id", "lane": "lane", "payload": "payload_id",
             "claim": "delay_message_id", "sched": "name"}
    return family, {names.get(family, "key"): _text(rest)}


def decode_entry(key: bytes, value: bytes) -> DumpEntry:
    """``key`` and ``value`` as plain data; a value that does not decode says why."""
    family, key_fields = decode_key(key)
    decoded: object
    try:
        if family in _VALUE_TYPES:
            decoded = plain(decode_value(value, _VALUE_TYPES[family]))
        elif family == "meta":
            meta_type = _META_TYPES.get(key)
            if meta_type is not None:
                decoded = plain(decode_value(value, meta_type))
            elif key in (keys.META_APPLIED, keys.META_RECORDS):
                decoded = decode_int(value)
            else:
                decoded = plain(msgspec.msgpack.decode(value))
        elif family == "msgattempt":
            decoded = _text(value)
        elif family == "retain":  # an m entry: when its SCHEDULE's result may go (ms)
            decoded = int.from_bytes(value, "big") if value else None
        else:
            decoded = plain(msgspec.msgpack.decode(value))
    except (msgspec.DecodeError, ValueError) as exc:
        decoded = {"undecodable": str(exc), "base64": base64.b64encode(value).decode()}
    return DumpEntry(family=family, key=key_fields, value=decoded)
