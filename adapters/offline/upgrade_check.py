"""``nereus upgrade check``: what a home needs before this build runs it, read offline.

Like ``pg_upgrade --check``: nothing is written and no engine is needed. Each configured
shard's database is opened read-only and its key schema compared with this build's (the
migration steps the engine will run at open, or a refusal when a newer build wrote it);
each catalogued checkpoint's digest version says whether its manifest is the current
format or an older one this build still verifies (``checkpoint upgrade`` rewrites it);
the home's feature level (``adapters/home/feature_level.py``) against this build's.
A refusal (a downgrade below what has been written) makes the answer "no".
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from nereus import __version__
from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.adapters.home.feature_level import build_level, home_level
from nereus.adapters.offline.checkpoint_catalog import catalog
from nereus.checkpoint.manifest import DIGEST_VERSION_OF_FORMAT, FORMAT_VERSION
from nereus.features import describe
from nereus.layout import HomeLayout
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.migrations import SchemaRefused, plan
from nereus.state.store import ShardStore


class ShardSchema(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One shard's database: its key schema and what opening it will do."""

    shard: str
    schema_version: int | None  # null: no database yet (made at the first start)
    verdict: str  # CURRENT, MIGRATE, NO_DATABASE or REFUSED
    steps: list[str]  # the migration steps, in order, for MIGRATE
    detail: str = ""


class CheckpointFormats(msgspec.Struct, frozen=True, kw_only=True,
                        forbid_unknown_fields=True):
    """A shard's catalogued checkpoints by manifest format."""

    shard: str
    current: int  # in this build's manifest format
    older: int  # in an older format this build verifies (`checkpoint upgrade` rewrites them)


class UpgradeCheck(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the home needs before this build runs it, and what will change."""

    build: str
    build_level: int
    home_level: int
    home_level_means: str
    shards: list[ShardSchema]
    checkpoints: list[CheckpointFormats]
    changes: list[str]  # what starting this build will change, in words
    refusals: list[str]  # why this build must not run this home (empty: it may)
    ok: bool


def shard_schema(layout: HomeLayout, shard: ShardId) -> ShardSchema:
    """The key schema of ``shard``'s database, and its verdict."""
    path = layout.shard_state(shard)
    if not (path / "CURRENT").exists():
        return ShardSchema(shard=str(shard), schema_version=None, verdict="NO_DATABASE",
                           steps=[])
    with ShardStore.open(path, read_only=True, lazy_indexes=True) as store:
        identity = store.identity()
    found = keys.SCHEMA_VERSION if identity is None else identity.schema_version
    try:
        steps = plan(found)
    except SchemaRefused as exc:
        return ShardSchema(shard=str(shard), schema_version=found, verdict="REFUSED",
                           steps=[], detail=str(exc))
    return ShardSchema(shard=str(shard), schema_version=found,
                       verdict="MIGRATE" if steps else "CURRENT",
                       steps=[f"{s.from_version} -> {s.from_version + 1}: {s.description}"
                              for s in steps])


def checkpoint_formats(objects: ObjectStore, shard: ShardId) -> CheckpointFormats:
    current_digest = DIGEST_VERSION_OF_FORMAT[FORMAT_VERSION]
    entries = catalog(objects, shard)
    current = sum(1 for e in entries if e.digest_version == current_digest)
    return CheckpointFormats(shard=str(shard), current=current, older=len(entries) - current)


def check_home(home: Path, shards: list[ShardId],
               objects: ObjectStore | None) -> UpgradeCheck:
    """The whole report (module docstring); ``objects`` None: checkpoints not looked at."""
    layout = HomeLayout(home)
    level, supported = home_level(home).level, build_level()
    schemas = [shard_schema(layout, shard) for shard in shards]
    formats = [] if objects is None else [checkpoint_formats(objects, s) for s in shards]
    refusals = [f"{s.shard}: {s.detail}" for s in schemas if s.verdict == "REFUSED"]
    if level > supported:
        refusals.append(f"the home is at feature level {level}; this build ({__version__}) "
                        f"supports {supported}")
    changes = [f"{s.shard}: key schema {step}" for s in schemas for step in s.steps]
    changes += [f"{f.shard}: {f.older} checkpoint(s) in an older manifest format, verified "
                "as they are (`nereus checkpoint upgrade` rewrites them)"
                for f in formats if f.older]
    return UpgradeCheck(build=__version__, build_level=supported, home_level=level,
                        home_level_means=describe(level), shards=schemas,
                        checkpoints=formats, changes=changes, refusals=refusals,
                        ok=not refusals)


__all__ = ["CheckpointFormats", "ShardSchema", "UpgradeCheck", "check_home"]
