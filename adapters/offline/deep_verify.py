"""Deep verification: does the Shard Log after a checkpoint really lead to the next one?

Restore the checkpoint into a scratch database, replay the log from its applied position
to a reference point, and compare digests with the reference: the next catalogued
checkpoint, or else the live database (at its own applied position). On a mismatch,
``locate`` finds where the two diverge: the keys whose values differ, and the first log
position whose writes touched one of them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nereus.adapters.backends.shardlog.protocol import LogRecord, ShardLog
from nereus.adapters.offline.log_replay import store_digest
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.checkpoint.manifest import Manifest
from nereus.checkpoint.verify import Check
from nereus.machine import Applied
from nereus.state.decode import decode_key
from nereus.state.digest import DIGEST_VERSION
from nereus.state.store import ShardStore


@dataclass(frozen=True, slots=True)
class Reference:
    """What the replay must reproduce: a database directory at a known applied position."""

    description: str
    path: Path
    applied_position: int | None
    digest: str
    digest_version: int = DIGEST_VERSION


def _replicated(store: ShardStore) -> dict[bytes, bytes]:
    return dict(store.replicated())


def replay_from(image: Path, scratch: Path, log: ShardLog, *,
                stop_at: int | None,
                observer: Callable[[LogRecord, Applied], None] | None = None,
                progress: Callable[[int], None] | None = None,
                digest_version: int = DIGEST_VERSION) -> tuple[int, str]:
    """Copy the checkpoint image to ``scratch``, replay the log onto it; (records, digest
    of ``digest_version``)."""
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(image, scratch)
    with ShardStore.open(scratch) as store:
        runner = ShardRunner(store, log, batch_records=5_000, observer=observer)
        count = 0 if stop_at is None or runner.next_position <= stop_at else -1
        if count == 0:
            count = runner.run_until_caught_up(stop_at=stop_at, progress=progress)
        return max(count, 0), store_digest(store, digest_version)


def deep_checks(image: Path, manifest: Manifest, log: ShardLog, reference: Reference | None,
                *, progress: Callable[[int], None] | None = None) -> list[Check]:
    if reference is None:
        return [Check(name="deep_replay", ok=True, detail="no later checkpoint and no live "
                      "database to compare with; nothing to replay towards", skipped=True)]
    target = reference.applied_position
    start = -1 if manifest.applied_position is None else manifest.applied_position
    if target is None or target < start:
        return [Check(name="deep_replay", ok=False,
                      detail=f"{reference.description} is at position {target}, before the "
                      f"checkpoint's {manifest.applied_position}")]
    with tempfile.TemporaryDirectory(prefix="nereus-deep-") as tmp:
        scratch = Path(tmp) / "db"
        records, digest = replay_from(image, scratch, log, stop_at=target,
                                      progress=progress,
                                      digest_version=reference.digest_version)
        checks = [Check(name="deep_replay", ok=True, detail=f"replayed {records} record(s), "
                        f"positions {start + 1}..{target}")]
        if digest == reference.digest:
            checks.append(Check(name="deep_compare", ok=True, detail=f"replay digest "
                                f"{digest[:16]}.. equals {reference.description}"))
            return checks
        checks.append(Check(name="deep_compare", ok=False,
                            detail=f"replay digest {digest[:16]}.. differs from "
                            f"{reference.description} ({reference.digest[:16]}..)"))
        checks.append(locate(image, log, reference))
        return checks


def locate(image: Path, log: ShardLog, reference: Reference) -> Check:
    """The first diverging position and key between replay and the reference."""
    target = reference.applied_position
    with tempfile.TemporaryDirectory(prefix="nereus-locate-") as tmp:
        replayed_path = Path(tmp) / "replayed"
        touched: dict[bytes, int] = {}

        def observe(record: LogRecord, applied: Applied) -> None:
            for one in (applied, *applied.members):  # a PUBLISH_BATCH's writes: its members'
                for key in one.writes:
                    touched.setdefault(key, record.position)

        replay_from(image, replayed_path, log, stop_at=target, observer=observe)
        with ShardStore.open(replayed_path, read_only=True) as replayed, \
                ShardStore.open(reference.path, read_only=True) as ref:
            ours, theirs = _replicated(replayed), _replicated(ref)
    differing = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
    if not differing:
        return Check(name="divergence", ok=False,
                     detail="digests differ but no key differs (digest bug?)")
    by_position = sorted((touched[k], k) for k in differing if k in touched)
    if by_position:
        position, key = by_position[0]
        family, fields = decode_key(key)
        return Check(name="divergence", ok=False,
                     detail=f"first diverging position {position}: {family} {fields} "
                     f"({len(differing)} key(s) differ)")
    family, fields = decode_key(differing[0])
    return Check(name="divergence", ok=False,
                 detail=f"{family} {fields} differs but no log record after the checkpoint "
                 f"writes it: the checkpoint or the reference holds state the log does not explain "
                 f"({len(differing)} key(s) differ)")
