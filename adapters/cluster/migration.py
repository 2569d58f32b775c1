"""A cluster copied to another coordinator (``nereus cluster migrate --to URL``), and a
node's home pointed at it (``nereus cluster rejoin --to URL``).

Every durable record moves (configuration and audit, placements, drains, route evidence
keys, the checkpoint catalog, each shard's epoch counter, so the first take there is above
every epoch the log applied); ephemeral records belong to live sessions, so a migration
needs every node stopped and is refused naming any live one. The target must hold nothing
of this cluster's name, or a copy of this very cluster (``migrated`` or ``moved`` naming
the source). Order: check both sides; write ``migrated`` on the target by CAS and copy;
write ``moved`` on the source (``require_config`` refuses it from then on); look for live
nodes again and undo ``moved`` if one registered meanwhile; copy what changed; mark
``migrated`` done. Running it again resumes a migration stopped after ``moved``.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import ClusterHandle
from nereus.cluster import keys
from nereus.cluster.errors import ClusterNotInitialised, MigrationRefused
from nereus.cluster.records import (
    ClusterConfig,
    Member,
    Migrated,
    Moved,
    ShardEpoch,
    decode_record,
    encode_record,
)
from nereus.coordination.errors import KeyNotFound, UnexpectedVersionId
from nereus.coordination.protocol import Coordinator
from nereus.coordination.records import EXPECTED_RECORD_DOES_NOT_EXIST, Record, prefix_range

_TOP: Final = chr(0x10FFFF)  # above every key of the cluster's schema
_MARKERS: Final = frozenset({keys.MOVED, keys.MIGRATED})  # each copy's own


@dataclass(frozen=True, slots=True)
class Migration:
    """What a migration copied (or, dry, would copy)."""

    cluster: str
    source: str
    target: str
    records: int  # durable records copied
    kinds: dict[str, int]  # by the key's first segment: config, placement, epochs, catalog...
    epochs: dict[str, int]  # each shard's epoch counter as copied
    replaced: str | None  # what the target held of this cluster before (None: nothing)
    dry_run: bool
    recopied: int = 0  # records that changed on the source while it was copied


@dataclass(slots=True)
class _Cluster:
    """One side of a migration: every record under the cluster's root, by relative key."""

    handle: ClusterHandle
    records: dict[str, Record] = field(default_factory=dict)

    @property
    def c(self) -> Coordinator:
        return self.handle.coordinator

    def key(self, relative: str) -> str:
        return self.handle.root + relative

    def read(self) -> _Cluster:
        low, high = everything(self.handle.root)
        cut = len(self.handle.root)
        self.records = {record.key[cut:]: record for record in self.c.range_scan(low, high)}
        return self

    def durable(self) -> dict[str, Record]:
        return {key: record for key, record in self.records.items()
                if not record.version.is_ephemeral and key not in _MARKERS}

    def live(self) -> list[str]:
        """Who holds a session here: each live node (its member record), else each key an
        ephemeral record holds."""
        members = [decode_member(r) for k, r in sorted(self.records.items())
                   if k.startswith(keys.NODES) and r.version.is_ephemeral]
        if members:
            return [f"node {m.node_id} ({m.host} pid {m.pid}, admin {m.address})"
                    for m in members]
        return [f"{k} (on session {r.version.session_id})"
                for k, r in sorted(self.records.items()) if r.version.is_ephemeral]

    def marker(self, name: str, kind: type[Migrated] | type[Moved]) -> Migrated | Moved | None:
        record = self.records.get(name)
        return None if record is None else decode_record(record.value, kind)


def everything(root: str) -> tuple[str, str]:
    """The key range of every record of a cluster whose keys start with ``root``."""
    return ("", _TOP) if not root else prefix_range(root)


def decode_member(record: Record) -> Member:
    return decode_record(record.value, Member)


def same_place(a: str, b: str) -> bool:
    """Whether two coordinator URLs name the same cluster in the same store."""
    return canonical(a) == canonical(b)


def canonical(url: str) -> str:
    """A coordinator URL as its backend writes it (default port and namespace filled in),
    parsed without connecting; an unparsable one as it is."""
    from urllib.parse import urlsplit

    from nereus.errors import UsageError

    scheme = urlsplit(url).scheme
    try:
        if scheme == "oxia":
            from nereus.adapters.backends.coordination.oxia_keys import parse_oxia_url

            return parse_oxia_url(url).url
        if scheme == "etcd":
            from nereus.adapters.backends.coordination.etcd_wire import parse_etcd_url

            return parse_etcd_url(url).url
    except UsageError:
        return url
    return url


def migrate(source: ClusterHandle, target: ClusterHandle, *, operator: str, reason: str,
            now_ms: int, dry_run: bool = False) -> Migration:
    """Copy the cluster at ``source`` to ``target`` (the module docstring's steps);
    ``MigrationRefused`` says why when it will not, and nothing is written then."""
    if same_place(source.url, target.url):
        raise MigrationRefused(f"{target.url} is where the cluster is already",
                               hint="name another coordinator (or another cluster name) "
                                    "with --to")
    src, dst = _Cluster(source).read(), _Cluster(target).read()
    _check_source(src, target.url)
    replaced = _check_target(dst, source.url)
    durable = src.durable()
    epochs = _epochs(durable)
    report = Migration(cluster=source.cluster, source=source.url, target=target.url,
                       records=len(durable), kinds=dict(sorted(_kinds(durable).items())),
                       epochs=epochs, replaced=replaced, dry_run=dry_run)
    if dry_run:
        return report
    started = Migrated(source=source.url, operator=operator, reason=reason,
                       started_ms=now_ms)
    _begin(dst, started)
    copied: dict[str, bytes] = {}
    _copy(dst, durable, copied)
    moved_version = _mark_moved(src, Moved(target=target.url, operator=operator,
                                           reason=reason, moved_ms=now_ms))
    late = _Cluster(source).read()
    if late.live():
        _unmark_moved(src, moved_version)
        raise MigrationRefused(
            f"a node joined {source.url} while it was copied: {'; '.join(late.live())}; "
            "the cluster stays there",
            hint="stop every node of the cluster (`nereus engine stop` in each home), then "
                 "run the migration again")
    final = late.durable()
    recopied = _copy(dst, final, copied)
    done = Migrated(source=source.url, operator=operator, reason=reason, started_ms=now_ms,
                    done=True, records=len(final), epochs=len(_epochs(final)))
    dst.c.put(dst.key(keys.MIGRATED), encode_record(done))
    return Migration(cluster=source.cluster, source=source.url, target=target.url,
                     records=len(final), kinds=dict(sorted(_kinds(final).items())),
                     epochs=_epochs(final), replaced=replaced, dry_run=False,
                     recopied=recopied)


def _check_source(src: _Cluster, target_url: str) -> None:
    if keys.CONFIG not in src.records:
        raise ClusterNotInitialised(src.handle.url)
    moved = src.marker(keys.MOVED, Moved)
    if isinstance(moved, Moved) and not same_place(moved.target, target_url):
        raise MigrationRefused(
            f"the cluster at {src.handle.url} moved to {moved.target} already",
            hint=f"migrate it from there: `nereus cluster migrate --coordinator "
                 f"{moved.target} --to {target_url}`")
    live = src.live()
    if live:
        raise MigrationRefused(
            f"{len(live)} node(s) of the cluster are live at {src.handle.url}: "
            + "; ".join(live),
            hint="stop every node first (`nereus engine stop` in each home); a node that "
                 "died keeps its records until its session's TTL has passed")


def _check_target(dst: _Cluster, source_url: str) -> str | None:
    """Whether ``dst`` may receive the cluster; what it held of it (None: nothing)."""
    if not dst.records:
        return None
    migrated = dst.marker(keys.MIGRATED, Migrated)
    moved = dst.marker(keys.MOVED, Moved)
    if isinstance(migrated, Migrated) and same_place(migrated.source, source_url):
        whose = ("an earlier copy of this cluster" if migrated.done
                 else "a copy of this cluster that stopped part-way")
    elif isinstance(moved, Moved) and same_place(moved.target, source_url):
        whose = "this cluster, as it was when it moved to " + moved.target
    else:
        raise MigrationRefused(
            f"{dst.handle.url} holds another cluster: {_describe(dst)}; it was left as it is",
            hint="migrate to a cluster name of its own (the URL's last segment), or forget "
                 "that cluster there first if nobody needs it")
    live = dst.live()
    if live:
        raise MigrationRefused(
            f"{dst.handle.url} holds {whose}, with live sessions: " + "; ".join(live),
            hint="stop the nodes that run there first")
    return whose


def _describe(dst: _Cluster) -> str:
    record = dst.records.get(keys.CONFIG)
    if record is None:
        return f"{len(dst.records)} record(s) under its name, and no configuration"
    config = decode_record(record.value, ClusterConfig)
    return (f"configuration revision {config.revision} by {config.changed_by} "
            f"({config.reason}), {len(dst.records)} record(s)")


def _kinds(durable: dict[str, Record]) -> Counter[str]:
    return Counter(key.split("/", 1)[0] for key in durable)


def _epochs(durable: dict[str, Record]) -> dict[str, int]:
    return {key[len(keys.EPOCHS):]: decode_record(record.value, ShardEpoch).epoch
            for key, record in sorted(durable.items()) if key.startswith(keys.EPOCHS)}


def _begin(dst: _Cluster, started: Migrated) -> None:
    """Make the target ours: ``migrated`` written by compare-and-set on the version read (a
    second migration at the same time finds it changed and stops), then every other record
    an earlier copy left deleted."""
    expected = dst.records.get(keys.MIGRATED)
    try:
        dst.c.put(dst.key(keys.MIGRATED), encode_record(started),
                  expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST if expected is None
                  else expected.version.version_id)
    except UnexpectedVersionId:
        raise MigrationRefused(f"another migration into {dst.handle.url} began meanwhile",
                               hint="run one migration at a time") from None
    for key in sorted(dst.records):
        if key != keys.MIGRATED:
            dst.c.delete(dst.key(key))


def _copy(dst: _Cluster, durable: dict[str, Record], copied: dict[str, bytes]) -> int:
    """Put every record of ``durable`` on ``dst`` whose value ``copied`` does not hold
    already, and delete from ``dst`` what ``copied`` holds and ``durable`` does not;
    ``copied`` follows. How many records it put or deleted."""
    changed = 0
    for key, record in sorted(durable.items()):
        if copied.get(key) == record.value:
            continue
        dst.c.put(dst.key(key), record.value)
        copied[key] = record.value
        changed += 1
    for key in sorted(set(copied) - set(durable)):
        dst.c.delete(dst.key(key))
        del copied[key]
        changed += 1
    return changed


def _mark_moved(src: _Cluster, moved: Moved) -> int:
    """Write ``moved`` on the source (again, when resuming a migration to the same
    target); its version."""
    current = src.records.get(keys.MOVED)
    try:
        return src.c.put(src.key(keys.MOVED), encode_record(moved),
                         expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST if current is None
                         else current.version.version_id).version_id
    except UnexpectedVersionId:
        raise MigrationRefused(f"another migration of {src.handle.url} began meanwhile",
                               hint="run one migration at a time") from None


def _unmark_moved(src: _Cluster, version_id: int) -> None:
    with contextlib.suppress(UnexpectedVersionId, KeyNotFound):
        src.c.delete(src.key(keys.MOVED), expected_version_id=version_id)


def check_rejoin(store: ClusterStore, previous: str, node_id: str) -> None:
    """``store`` (the coordinator a home is to name) holds the cluster the home's node
    belonged to at ``previous``, copied whole, and no live node runs under ``node_id``
    there; ``MigrationRefused`` says which does not hold."""
    store.require_config()
    found = store.migrated()
    if found is None or not same_place(found.source, previous):
        came = "was not migrated" if found is None else f"was migrated from {found.source}"
        raise MigrationRefused(
            f"the cluster at {store.url} {came}, not from {previous} (this home's "
            "coordinator): it is another cluster",
            hint=f"migrate this one first: `nereus cluster migrate --coordinator {previous} "
                 f"--to {store.url}`")
    if not found.done:
        raise MigrationRefused(
            f"the migration of {previous} to {store.url} stopped part-way",
            hint=f"run it again: `nereus cluster migrate --coordinator {previous} "
                 f"--to {store.url}`")
    live = [m for m in store.members() if m == node_id or m.startswith(f"{node_id}-w")]
    if live:
        raise MigrationRefused(f"node {node_id} runs at {store.url} already ({live[0]} is "
                               "live there)", hint="stop it, or rejoin another home")
