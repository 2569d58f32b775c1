"""The RocksDB key schema of a Delay Shard (schema version 1); the table of families and
why each is laid out as it is: ``docs/state.md``.

One database per shard; families are one-byte key prefixes, not column families, so one
WriteBatch and one iterator cover everything and a checkpoint is a plain directory.
Prefixes below 0x80 hold **replicated state**, derived from the Shard Log by ``apply``
alone and covered by the state digest; prefixes from 0x80 hold **local runtime state** of
the running owner (claims, scheduler cursors), excluded from the digest. Integers in keys
are big-endian, because RocksDB orders keys bytewise: a lane's ``timeline`` scans in
actionAt order and ``retain`` starts with the oldest expiry. Changing any layout bumps
``SCHEMA_VERSION`` (``meta/schema_version``); a new family is not a layout change.
"""

from __future__ import annotations

from typing import Final

SCHEMA_VERSION: Final = 1

META: Final = b"\x01"
MSG: Final = b"\x02"
TIMELINE: Final = b"\x03"
RESULT: Final = b"\x04"
REJECT: Final = b"\x05"
ATTEMPT: Final = b"\x06"
OBLIGATION: Final = b"\x07"
LANE: Final = b"\x08"
PAYLOAD: Final = b"\x09"
MSG_ATTEMPT: Final = b"\x0a"
RETAIN: Final = b"\x0b"  # + u64 expire_at_ms + kind (b"m" message, b"r" result) + id
ORDER: Final = b"\x0c"  # + lane + 0x00 + u32 len + key + rank: an ORDERED lane's key queue
CLAIM: Final = b"\x81"
SCHED: Final = b"\x82"

FAMILIES: Final = {
    "meta": META,
    "msg": MSG,
    "timeline": TIMELINE,
    "result": RESULT,
    "reject": REJECT,
    "attempt": ATTEMPT,
    "obligation": OBLIGATION,
    "lane": LANE,
    "payload": PAYLOAD,
    "msgattempt": MSG_ATTEMPT,
    "retain": RETAIN,
    "order": ORDER,
    "claim": CLAIM,
    "sched": SCHED,
}
FAMILY_BY_PREFIX: Final = {prefix[0]: name for name, prefix in FAMILIES.items()}
REPLICATED_LIMIT: Final = 0x80  # first prefix byte of local runtime state

# meta names
META_IDENTITY: Final = META + b"identity"
META_SCHEMA: Final = META + b"schema_version"
META_APPLIED: Final = META + b"applied_position"
META_RECORDS: Final = META + b"records_applied"
META_PAUSED: Final = META + b"paused"
META_ACTIVATION: Final = META + b"activation"
META_CHECKPOINT_MARK: Final = META + b"checkpoint_mark"
META_ROUTE: Final = META + b"route"  # the applied ROUTE_IDENTITY (whose log this shard is)
META_LANE_LIMITS: Final = META + b"lane_limits\x00"  # + lane: its LANE_LIMITS (LaneLimit)
# the shard's own dedup window, from its last SHARD_RETENTION (ShardRetentionValue); absent
# in shards that never had one, so their state and digests are as they always were
META_SHARD_RETENTION: Final = META + b"shard_retention"
# the shard's limits, from its last SHARD_LIMITS (Limits); absent: DEFAULT_LIMITS
META_SHARD_LIMITS: Final = META + b"shard_limits"


def is_replicated(key: bytes) -> bool:
    """True for keys the state digest covers (derived from the log only)."""
    return key[0] < REPLICATED_LIMIT


def u64(value: int) -> bytes:
    """Big-endian unsigned 64-bit, so bytewise order is numeric order."""
    return value.to_bytes(8, "big")


def lane_limits_key(lane: str) -> bytes:
    return META_LANE_LIMITS + lane.encode()


def msg_key(delay_message_id: str) -> bytes:
    return MSG + delay_message_id.encode()


def timeline_lane_prefix(lane: str) -> bytes:
    return TIMELINE + lane.encode() + b"\x00"


def timeline_key(lane: str, action_at_ms: int, delay_message_id: str) -> bytes:
    # timeline_lane_prefix(lane) + u64(action_at_ms) + id, spelled out: every SCHEDULE
    # builds one, and the two calls cost more than the concatenation
    return (TIMELINE + lane.encode() + b"\x00" + action_at_ms.to_bytes(8, "big")
            + delay_message_id.encode())


def split_timeline_key(key: bytes) -> tuple[str, int, str]:
    """(lane, actionAt ms, delayMessageId) of a timeline key."""
    lane, _, rest = key[1:].partition(b"\x00")
    return lane.decode(), int.from_bytes(rest[:8], "big"), rest[8:].decode()


ORDER_IN_FLIGHT: Final = b"\x00"  # rank of a PUBLISHING or UNCERTAIN message: first
ORDER_WAITING: Final = b"\x01"  # rank of a SCHEDULED one: then by deliverAt, source order


def order_prefix(lane: str, key: str) -> bytes:
    """Every order entry of ``key`` on ``lane`` starts with this."""
    raw = key.encode()
    return ORDER + lane.encode() + b"\x00" + len(raw).to_bytes(4, "big") + raw


def order_key(lane: str, key: str, delay_message_id: str, *, in_flight: bool,
              deliver_at_ms: int, created_position: int) -> bytes:
    """A message's place in its key's queue (module docstring)."""
    if in_flight:
        rank = ORDER_IN_FLIGHT
    else:
        rank = ORDER_WAITING + u64(deliver_at_ms) + u64(created_position)
    return order_prefix(lane, key) + rank + delay_message_id.encode()


def order_entry_message(entry: bytes, prefix: bytes) -> tuple[str, bool]:
    """(delayMessageId, in flight) of an order entry under ``prefix``."""
    rank = entry[len(prefix):]
    if rank[:1] == ORDER_IN_FLIGHT:
        return rank[1:].decode(), True
    return rank[17:].decode(), False


def result_key(dedup_key: str) -> bytes:
    return RESULT + dedup_key.encode()


def reject_key(position: int) -> bytes:
    return REJECT + u64(position)


def dedup_key_of(result_key: bytes) -> str:
    """The dedup key a ``result`` key stores the result of (``result_key``'s inverse)."""
    return result_key[len(RESULT):].decode()


def reject_position_of(reject_key: bytes) -> int:
    """The position a ``reject`` key stores the rejection of (``reject_key``'s inverse)."""
    return int.from_bytes(reject_key[len(REJECT):], "big")


def attempt_key(attempt_id: str) -> bytes:
    return ATTEMPT + attempt_id.encode()


def obligation_prefix(delay_message_id: str) -> bytes:
    return OBLIGATION + delay_message_id.encode() + b"\x00"


def obligation_key(delay_message_id: str, attempt_id: str) -> bytes:
    return obligation_prefix(delay_message_id) + attempt_id.encode()


def msg_attempt_prefix(delay_message_id: str) -> bytes:
    return MSG_ATTEMPT + delay_message_id.encode() + b"\x00"


def msg_attempt_key(delay_message_id: str, attempt_no: int) -> bytes:
    return msg_attempt_prefix(delay_message_id) + attempt_no.to_bytes(4, "big")


def lane_key(lane: str) -> bytes:
    return LANE + lane.encode()


def payload_key(payload_id: str) -> bytes:
    return PAYLOAD + payload_id.encode()


RETAIN_MESSAGE: Final = b"m"  # a terminal message and what belongs to it
RETAIN_RESULT: Final = b"r"  # a dedup result
RETAIN_REJECT: Final = b"j"  # a ``reject`` result, by its source position (decimal)
RETAIN_PAYLOAD: Final = b"p"  # a payload stage, by payloadId: goes if no message used it
RETAIN_KINDS: Final = (RETAIN_MESSAGE, RETAIN_RESULT, RETAIN_REJECT, RETAIN_PAYLOAD)
RETAIN_ID_AT: Final = 10  # prefix, u64 expireAt, kind byte: the id starts here


MAX_EXPIRE_AT_MS: Final = 2**64 - 1  # a retain key holds expireAt as u64


def expire_at(broker_ms: int, span_ms: int) -> int:
    """``broker_ms + span_ms`` held inside a u64, as a retain key's expireAt: a retention
    or window too long to hold (a record's field is any MessagePack integer) means "not in
    this key space's lifetime" instead of an overflow that would stop apply."""
    return min(max(broker_ms + span_ms, 0), MAX_EXPIRE_AT_MS)


def retain_key(expire_at_ms: int, kind: bytes, ident: str) -> bytes:
    """When ``ident`` (a delayMessageId for ``m``, a dedup key for ``r``) may be swept."""
    return RETAIN + expire_at_ms.to_bytes(8, "big") + kind + ident.encode()


def split_retain_key(key: bytes) -> tuple[int, bytes, str]:
    """(expireAt ms, kind byte, id) of a retain key."""
    return (int.from_bytes(key[1:9], "big"), key[9:RETAIN_ID_AT],
            key[RETAIN_ID_AT:].decode())


def claim_key(delay_message_id: str) -> bytes:
    return CLAIM + delay_message_id.encode()


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\xff" * (len(prefix) + 1)
    return trimmed[:-1] + bytes([trimmed[-1] + 1])
