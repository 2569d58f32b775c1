"""Build ``tests/vectors/wire.json`` from the Python client (``python -m tests.vectors.build``).

The file is committed and frozen: ``tests/unit/test_wire_vectors.py`` holds today's code to
it, so a change of the wire format shows up as a failing test (and a new vectors file, on
purpose, with a new format version: docs/wire.md). Another implementation reads the same
file and proves itself against it.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

from nereus.client.prepare import (
    Prepared,
    RouteRef,
    prepare_cancel,
    prepare_payload_commit,
    prepare_payload_reserve,
    prepare_reschedule,
    prepare_schedule,
)
from nereus.records import QueryBarrier, encode
from nereus.records.system import RouteIdentity
from nereus.shard import partition_for

ROUTE = RouteRef(name="default", partitions=8, ordered_lanes=frozenset({"orders"}))
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in epoch ms


def _route(route: RouteRef) -> dict[str, Any]:
    return {"name": route.name, "partitions": route.partitions,
            "ordered_lanes": sorted(route.ordered_lanes)}


def _vector(name: str, note: str, fields: dict[str, Any], prepared: Prepared,
            route: RouteRef = ROUTE) -> dict[str, Any]:
    return {"name": name, "note": note, "kind": prepared.kind, "route": _route(route),
            "input": fields, "command_id": prepared.command_id,
            "partition": prepared.shard.partition, "record_hex": prepared.data.hex()}


def _schedule(name: str, note: str, route: RouteRef = ROUTE, **fields: Any) -> dict[str, Any]:
    given = dict(fields)
    if "payload" in given:
        given["payload"] = base64.b64decode(given["payload"])
    return _vector(name, note, fields, prepare_schedule(route, **given), route)


def schedules() -> list[dict[str, Any]]:
    return [
        _schedule("schedule-minimal", "the least a SCHEDULE says; its command id derived from "
                  "its content (no command_id given)", delay_message_id="order-17",
                  lane="local", deliver_at_ms=T0 + 5_000),
        _schedule("schedule-full", "every field; headers written in any order are encoded "
                  "sorted by name", command_id="cmd-0001", delay_message_id="invoice/2026/4",
                  lane="billing", deliver_at_ms=T0 + 86_400_000, action_at_ms=T0 + 86_300_000,
                  expire_at_ms=T0 + 90_000_000, key="customer-42",
                  headers={"trace-id": "abc", "content-type": "application/json"},
                  payload=base64.b64encode(b'{"total": 42}').decode()),
        _schedule("schedule-binary-payload", "a payload that is not UTF-8 travels as MessagePack "
                  "bin", command_id="cmd-0002", delay_message_id="blob-1", lane="local",
                  deliver_at_ms=T0, payload=base64.b64encode(bytes(range(256))).decode()),
        _schedule("schedule-unicode", "ids, lane-free text and headers are UTF-8; the partition "
                  "hashes the id's UTF-8 bytes", command_id="cmd-0003",
                  delay_message_id="commande-éèê-数据", lane="local", deliver_at_ms=T0 + 1,
                  headers={"émetteur": "Zoë"}),
        _schedule("schedule-ordered-key", "a keyed message of an ORDERED lane is placed on its "
                  "key's partition, not its id's", command_id="cmd-0004",
                  delay_message_id="order-1", lane="orders", deliver_at_ms=T0 + 60_000,
                  key="customer-7"),
        _schedule("schedule-unordered-key", "the same key on a lane that is not ORDERED: placed "
                  "by the id", command_id="cmd-0005", delay_message_id="order-1",
                  lane="local", deliver_at_ms=T0 + 60_000, key="customer-7"),
        _schedule("schedule-payload-ref", "a committed large payload instead of inline bytes",
                  command_id="cmd-0006", delay_message_id="big-1", lane="local",
                  deliver_at_ms=T0 + 10_000, payload_ref="pl-big-1"),
        _schedule("schedule-small-integers", "integers take the smallest MessagePack form "
                  "(epoch ms 0 is a positive fixint)", command_id="c", delay_message_id="m",
                  lane="l", deliver_at_ms=0),
        _schedule("schedule-one-partition", "a route of one partition: everything on 0",
                  RouteRef(name="solo", partitions=1), delay_message_id="order-17",
                  lane="local", deliver_at_ms=T0 + 5_000),
    ]


def others() -> list[dict[str, Any]]:
    cancel = prepare_cancel(ROUTE, command_id="cmd-0100", delay_message_id="order-17")
    moved = prepare_reschedule(ROUTE, command_id="cmd-0101", delay_message_id="order-17",
                               deliver_at_ms=T0 + 7_200_000, expire_at_ms=T0 + 9_000_000)
    reserve = prepare_payload_reserve(ROUTE, command_id="cmd-0102", delay_message_id="big-1",
                                      payload_id="pl-big-1", size_bytes=10_485_760,
                                      sha256="ab" * 32, expires_at_ms=T0 + 3_600_000)
    commit = prepare_payload_commit(ROUTE, command_id="cmd-0103", delay_message_id="big-1",
                                    payload_id="pl-big-1", size_bytes=10_485_760,
                                    sha256="ab" * 32,
                                    object_key="payloads/default/3/pl-big-1")
    return [
        _vector("cancel", "CANCEL goes to the message's partition", {
            "command_id": "cmd-0100", "delay_message_id": "order-17"}, cancel),
        _vector("reschedule", "RESCHEDULE; action_at_ms omitted (derived when applied)", {
            "command_id": "cmd-0101", "delay_message_id": "order-17",
            "deliver_at_ms": T0 + 7_200_000, "expire_at_ms": T0 + 9_000_000}, moved),
        _vector("payload-reserve", "the first step of a large payload, on the partition of "
                "the message that will use it", {
                    "command_id": "cmd-0102", "delay_message_id": "big-1",
                    "payload_id": "pl-big-1", "size_bytes": 10_485_760, "sha256": "ab" * 32,
                    "expires_at_ms": T0 + 3_600_000}, reserve),
        _vector("payload-commit", "after the upload: the object's key is under its shard's "
                "prefix", {
                    "command_id": "cmd-0103", "delay_message_id": "big-1",
                    "payload_id": "pl-big-1", "size_bytes": 10_485_760, "sha256": "ab" * 32,
                    "object_key": "payloads/default/3/pl-big-1"}, commit),
    ]


def plain_records() -> list[dict[str, Any]]:
    """Records a producer writes without a partition of their own choosing."""
    barrier = QueryBarrier(command_id="barrier-1")
    identity = RouteIdentity(route_id="398b55dcd1e34e34824e6f2a08364078", route="default",
                             partition=3, partitions=8)
    return [
        {"name": "query-barrier", "note": "written to each partition a query waits on",
         "kind": "QUERY_BARRIER", "input": {"command_id": "barrier-1"},
         "record_hex": encode(barrier).hex()},
        {"name": "route-identity", "note": "the first record of every partition of a route's "
         "Command Topic (written once, to an empty partition)", "kind": "ROUTE_IDENTITY",
         "input": {"route_id": identity.route_id, "route": "default", "partition": 3,
                   "partitions": 8}, "record_hex": encode(identity).hex()},
    ]


def partitions() -> list[dict[str, Any]]:
    ids = ["order-17", "a", "", "数据", "x" * 256, "invoice/2026/4"]
    return [{"key": key, "partitions": count, "partition": partition_for(key, count)}
            for key in ids for count in (1, 2, 8, 12, 1000)]


REFUSED = [
    ("bad-magic", "4e5302" + encode(QueryBarrier(command_id="b")).hex()[6:], "BAD_MAGIC", 0),
    ("unsupported-version", "4e5201" + encode(QueryBarrier(command_id="b")).hex()[6:],
     "UNSUPPORTED_VERSION", 2),
    # a CANCEL whose two fields come in the other order: decodes, but is not canonical
    ("non-canonical-field-order",
     "4e520283a46b696e64a643414e43454cb064656c61795f6d6573736167655f6964a26d31"
     "aa636f6d6d616e645f6964a26331", "NON_CANONICAL", None),
    # deliver_at_ms 5 written as uint64 (cf) instead of a fixint
    ("non-canonical-integer-width",
     "4e52028ba46b696e64a85343484544554c45aa636f6d6d616e645f6964a163b064656c61795f6d657373"
     "6167655f6964a16da46c616e65a16cad64656c697665725f61745f6d73cf0000000000000005ac616374"
     "696f6e5f61745f6d73c0ac6578706972655f61745f6d73c0a36b6579c0a76865616465727380a7706179"
     "6c6f6164c400ab7061796c6f61645f726566c0", "NON_CANONICAL", None),
    ("unknown-field", "4e520284a46b696e64a643414e43454caa636f6d6d616e645f6964a26331b064656c6179"
     "5f6d6573736167655f6964a26d31a5657874726101", "INVALID_FIELD", None),
    ("missing-field", "4e520282a46b696e64a643414e43454caa636f6d6d616e645f6964a26331",
     "INVALID_FIELD", None),
    ("truncated", encode(QueryBarrier(command_id="barrier-1")).hex()[:-4], "MALFORMED", None),
]


def refused() -> list[dict[str, Any]]:
    return [{"name": name, "record_hex": data, "reason": reason, "at_byte": at}
            for name, data, reason, at in REFUSED]


def build() -> dict[str, Any]:
    return {
        "format": "nereus-wire-vectors", "wire_version": 2,
        "about": "docs/wire.md: the Command Topic record format. 'input' fields are the "
                 "command's (payload base64); record_hex is the exact record, command_id the "
                 "id it carries (derived from its content where the input gives none), "
                 "partition where it goes on its route.",
        "commands": schedules() + others(),
        "records": plain_records(),
        "partitions": partitions(),
        "refused": refused(),
    }


def main() -> None:
    json.dump(build(), sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
