"""The RocksDB key schema of a Delay Shard (schema version 1).

One database per shard; families are key prefixes (one byte) rather than RocksDB column
families, so one WriteBatch and one iterator cover everything and a checkpoint is a
plain directory. Prefixes below 0x80 hold **replicated state**, derived from the Shard
Log by ``apply`` alone and covered by the state digest; prefixes from 0x80 hold **local
runtime state** written by the running owner (claims, scheduler cursors), excluded from
the digest and discarded or revalidated on restore.

======  ===========  ==========================================================  =========
prefix  family       key after the prefix                                        value
======  ===========  ==========================================================  =========
0x01    meta         name (utf-8)                                                per name
0x02    msg          delayMessageId (utf-8)                                      Message
0x03    timeline     lane, 0x00, actionAt (u64 big-endian), delayMessageId       WorkRef
0x04    result       dedup key (``c/`` command, ``a/`` admission, ``o/`` outcome, Result
                     ``s/`` system, ``b/`` barrier, ``m/`` operator)
0x05    reject       source position (u64 big-endian)                            Result
0x06    attempt      attemptId (utf-8)                                           Attempt
0x07    obligation   delayMessageId, 0x00, attemptId                             Obligation
0x08    lane         lane name (utf-8)                                           Lane
0x09    payload      payloadId (utf-8)                                           PayloadStage
0x0A    msgattempt   delayMessageId, 0x00, attempt number (u32 big-endian)       attemptId
0x0B    retain       expireAt (u64 big-endian), kind (``m`` message, ``r``       see below
                     result, ``j`` reject, ``p`` payload stage), delayMessageId,
                     dedup key, source position (decimal) or payloadId (utf-8)
0x0C    order        lane, 0x00, key length (u32 big-endian), key, rank:         empty
                     0x00 + delayMessageId (in flight) or 0x01 + deliverAt
                     (u64) + created position (u64) + delayMessageId
0x81    claim        delayMessageId (utf-8)                                      engine-owned
0x82    sched        name (utf-8)                                                engine-owned
======  ===========  ==========================================================  =========

Why these layouts:

* ``timeline`` is lane first, then big-endian actionAt, so a range scan of one lane yields
  its due work in time order and the scheduler can rotate across lanes without a hot
  early lane hiding the others (seed 000, section 5). Big-endian because RocksDB orders
  keys bytewise. Lane names never contain 0x00 (validated on SCHEDULE).
* ``reject`` holds the results of records that have no usable dedup key (undecodable
  bytes, a conflicting duplicate), keyed by their position so every record leaves one.
* ``obligation`` is keyed by message first so "the open attempts of this message" is one
  prefix scan; ``msgattempt`` lists every attempt of a message in attempt order, for
  ``message show``.
* ``order`` is an ORDERED lane's per-key queue: one entry for each unfinished keyed
  message (``nereus.machine.tx``), in-flight ones (PUBLISHING, UNCERTAIN) first, then the
  SCHEDULED ones by deliverAt and source order, so a key's head is the first key under
  its prefix (one seek). The key is length-prefixed: a message key may hold any byte.
* ``retain`` is what a retention SWEEP may remove and when (``nereus.machine.retention``):
  big-endian expireAt first, so the oldest retained item is the family's first key (one
  seek tells the engine whether a sweep is due, and ``shard inspect`` shows it). An ``m``
  entry (a terminal message, with its attempts and payload stage) holds the time its
  SCHEDULE's result may go (u64 big-endian; empty: kept); an ``r`` entry (a result) and a
  ``j`` entry (a ``reject`` result, named by its position in decimal) hold nothing, and
  so does a ``p`` entry (a payload stage, written when it is reserved: swept, it goes
  unless a message's SCHEDULE used it, which then takes it with its own sweep).

Changing any layout bumps ``SCHEMA_VERSION`` (stored in ``meta/schema_version``). A new
family is not a layout change (``retain`` came later: a database from before simply has
none, and apply writes it only once a lane's retention is replicated).
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
