"""How ``nereus checkpoint verify`` verifies a checkpoint directory (downloaded from the
catalog, or given with ``--path``): every check of the core's verification, computed in
parallel, and with ``--deep`` a replay of the Shard Log from it towards the next
catalogued checkpoint, or else the live database.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nereus.cli.context import Env

if TYPE_CHECKING:
    from nereus.adapters.offline.deep_verify import Reference
    from nereus.checkpoint.manifest import CatalogEntry, Manifest
    from nereus.checkpoint.verify import CheckpointVerification, VerifyReport
    from nereus.shard import ShardId


def verified(env: Env, directory: Path, entry: CatalogEntry | None, *, deep: bool,
             scratch: Path) -> CheckpointVerification:
    """Verify the checkpoint in ``directory`` (downloaded from ``entry``, or given with
    ``--path``); with ``deep``, also replay the log from it."""
    from nereus.adapters.offline.parallel_verify import verify_parallel

    expected = (entry.route, entry.partition) if entry else None
    with env.output.progress("verifying", None) as advance:
        # this process does nothing else meanwhile: it digests a key range itself
        report = verify_parallel(directory, expected_shard=expected, catalog=entry,
                                 progress=advance, digest_here=True)
    if entry is not None:
        report.path = Path(entry.manifest_key).parent
    if deep and report.manifest is not None:
        _deep(env, directory, report, report.manifest, scratch)
    return report.document()


def _deep(env: Env, directory: Path, report: VerifyReport, manifest: Manifest,
          scratch: Path) -> None:
    """Add the ``--deep`` checks to ``report`` (skipped when the checkpoint itself failed)."""
    from nereus.adapters.offline.deep_verify import deep_checks
    from nereus.checkpoint.verify import Check
    from nereus.shard import ShardId

    if not report.ok:
        report.checks.append(Check(name="deep_replay", ok=False,
                                   detail="skipped: the checkpoint itself failed",
                                   skipped=True))
        return
    shard = ShardId(manifest.route, manifest.partition)
    reference = _reference(env, shard, manifest, scratch)
    log = env.shard_log(shard, create=False)
    with env.output.progress("replaying", None) as advance:
        report.checks.extend(deep_checks(directory, manifest, log, reference,
                                         progress=advance))


def _reference(env: Env, shard: ShardId, after: Manifest, scratch: Path) -> Reference | None:
    """The next catalogued checkpoint after ``after`` (downloaded under ``scratch``), else
    the live database."""
    from nereus.adapters.offline.checkpoint_catalog import catalog
    from nereus.adapters.offline.checkpoint_restore import download
    from nereus.adapters.offline.deep_verify import Reference
    from nereus.adapters.offline.log_replay import store_digest
    from nereus.errors import NereusError
    from nereus.state.store import ShardStore

    objects = env.object_store()
    later = [e for e in catalog(objects, shard)
             if (e.applied_position or -1) > (after.applied_position or -1)]
    if later:
        entry = later[0]
        target = scratch / f"ref-{entry.checkpoint_id}"
        download(objects, entry, target)
        return Reference(f"checkpoint {entry.checkpoint_id}", target, entry.applied_position,
                         entry.digest, entry.digest_version)
    path = env.layout.shard_state(shard)
    try:
        with ShardStore.open(path, read_only=True) as live:
            return Reference("the live database", path, live.applied_position(),
                             store_digest(live))
    except NereusError:
        return None
