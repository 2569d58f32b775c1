"""Generated SCHEDULE records for one shard, ``default/0``: what apply.py and verify.py feed it.

Each record is what a client prepares (``nereus.client.prepare_schedule``): 32-hex command
and message ids, a key, a trace-id header and, half the time, a content-type, a payload of
``payload_bytes`` +- 10 random bytes, due 1 s to a day after ``base_ms``. The draws from
the seeded ``random.Random`` come in a fixed order, so a seed names one workload: verify.py
caches the shard it builds under that name and bumps its ``GENERATOR_VERSION`` when the
draws change. A workload with a single lane draws none for it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from nereus.client import RouteRef, prepare_schedule
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.values import Identity

DAY_MS = 86_400_000
ROUTE = RouteRef("default", 1)  # one partition: every command lands on default/0
SHARD = ShardId("default", 0)
IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """What differs between the benchmarks' records."""

    payload_bytes: int  # the mean payload size
    base_ms: int  # every deliver_at is 1 s to a day after this
    lanes: tuple[str, ...]  # one lane is used as it is; of several, each record draws one
    content_types: tuple[str, ...]  # the content-type header, for records that have one


def schedule_record(rng: random.Random, workload: Workload) -> bytes:
    """The canonical bytes of one SCHEDULE command drawn from ``rng``."""
    headers = {"trace-id": f"{rng.getrandbits(64):016x}"}
    if rng.random() < 0.5:
        headers["content-type"] = rng.choice(workload.content_types)
    size = max(0, workload.payload_bytes + rng.randint(-10, 10))
    lanes = workload.lanes
    return prepare_schedule(
        ROUTE,
        command_id=f"{rng.getrandbits(128):032x}",
        delay_message_id=f"{rng.getrandbits(128):032x}",
        lane=lanes[0] if len(lanes) == 1 else rng.choice(lanes),
        deliver_at_ms=workload.base_ms + rng.randrange(1_000, DAY_MS),
        key=f"customer-{rng.randrange(100_000)}",
        headers=headers,
        payload=rng.randbytes(size),
    ).data
