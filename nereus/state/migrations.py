"""State schema migrations, run when a shard's database is opened for writing.

A step takes key schema N to N+1 (``keys.SCHEMA_VERSION``): it reads the store and returns
the writes (None deletes) that change the layout; they are committed together with the
new ``meta/schema_version`` and ``meta/identity`` in ONE synced WriteBatch, so a crash
leaves the database at N or at N+1, never between, and a step runs again from the start.
A step that keeps the replicated meaning changes no replicated pair but those two, so a
replay from empty by the new build, which stamps the new schema, gives the same digest; a
step that changes the meaning comes with a digest version (``nereus.state.digest``) that
checkpoints and replay agree on. A database of a newer schema than this build's is a
downgrade below what has been written, and is refused naming both.

Release 0.1.0 wrote schema 1, the only one so far: ``MIGRATIONS`` is empty, and the tests
register a step to show the machinery (``tests/unit/test_schema_migrations.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import msgspec

from nereus.errors import StoreError
from nereus.state import keys
from nereus.state.values import Identity, encode_value

Reader = Callable[[bytes], bytes | None]
Scanner = Callable[[bytes, bytes], "list[tuple[bytes, bytes]]"]


@dataclass(frozen=True, slots=True)
class Migration:
    """Schema ``from_version`` to ``from_version + 1``: what changes, and the writes."""

    from_version: int
    description: str
    writes: Callable[[Reader, Scanner], Mapping[bytes, bytes | None]]


MIGRATIONS: Final[dict[int, Migration]] = {}  # from_version -> its step


class SchemaRefused(StoreError):
    """A schema this build cannot open (newer, or no chain of steps to its own)."""


def plan(found: int, target: int | None = None,
         migrations: Mapping[int, Migration] | None = None) -> list[Migration]:
    """The steps from schema ``found`` to ``target`` (this build's), in order; raises
    ``SchemaRefused`` for a newer schema or a missing step."""
    target = keys.SCHEMA_VERSION if target is None else target
    steps = MIGRATIONS if migrations is None else migrations
    if found > target:
        raise SchemaRefused(
            f"key schema {found} was written by a newer build; this build reads schema "
            f"{target} and older (a downgrade below what has been written is refused)",
            hint="run the build that wrote it, or a newer one")
    chain = []
    for version in range(found, target):
        step = steps.get(version)
        if step is None:
            raise SchemaRefused(f"no migration from key schema {version} to {version + 1}")
        chain.append(step)
    return chain


def step_writes(step: Migration, identity: Identity, read: Reader,
                scan: Scanner) -> dict[bytes, bytes | None]:
    """One step's batch: its own writes plus the new schema version in both places."""
    writes = dict(step.writes(read, scan))
    version = step.from_version + 1
    writes[keys.META_SCHEMA] = encode_value(version)
    writes[keys.META_IDENTITY] = encode_value(
        msgspec.structs.replace(identity, schema_version=version))
    return writes
