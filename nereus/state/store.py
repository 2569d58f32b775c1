"""The RocksDB state store of one Delay Shard (rocksdict, raw mode).

Every batch the shard runner commits is one WriteBatch written with ``sync=True``:
state, results and the applied position become durable together or not at all, so a
crash can never leave state ahead of or behind the applied position (STYLE, habit 4).
Raw mode is required: without it rocksdict pickles values.

The store is file I/O, not a clock or a network: it stays in the core so offline tools
and the engine share one implementation. A database carries its shard identity in
``meta/identity``; opening it for another shard is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from nereus.errors import NotFound, StoreError, StoreInUse
from nereus.state import keys
from nereus.state.store_options import shard_options
from nereus.state.values import Identity, decode_int, decode_value, encode_value

if TYPE_CHECKING:
    from nereus.state.memory import StoreMemory


def identity_writes(identity: Identity) -> dict[bytes, bytes | None]:
    """The writes that stamp a new database with its shard identity (digest-covered)."""
    return {
        keys.META_IDENTITY: encode_value(identity),
        keys.META_SCHEMA: encode_value(keys.SCHEMA_VERSION),
    }


class LiveFile(msgspec.Struct, frozen=True):
    """One of RocksDB's live table files (its ``live_files`` entry). A Struct: a NamedTuple
    here cost ``shard inspect`` 2 ms at import, compiling its string annotations."""

    name: str
    size: int
    level: int
    start_key: bytes
    end_key: bytes
    num_entries: int


def _below(items: Iterator[tuple[bytes, bytes]], end: bytes,
           keep: object) -> Iterator[tuple[bytes, bytes]]:
    """``items`` up to ``end``. RocksDB's upper bound points into the ``end`` bytes and
    the ReadOptions rather than copying them: this generator keeps both alive while the
    scan runs (a caller's temporary ``end`` freed early left the bound dangling, and
    ``scan_prefix`` read on into the next family), and checks the bound itself too."""
    try:
        for key, value in items:
            if key >= end:
                return
            yield key, value
    finally:
        del keep  # held by this frame until the scan ends


def lock_holder(path: Path) -> int | None:
    """The pid holding RocksDB's ``LOCK`` file of the database at ``path``, if another
    process does. RocksDB takes a POSIX record lock on it, and ``F_GETLK`` names the
    holder without taking anything; a lock of this very process is not reported."""
    import fcntl
    import os
    import struct

    try:
        fd = os.open(path / "LOCK", os.O_RDONLY)
    except OSError:
        return None
    try:
        # struct flock: l_type, l_whence, l_start, l_len, l_pid (+ padding)
        probe = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0) + bytes(4)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, probe)
    except OSError:
        return None
    finally:
        os.close(fd)
    kind, _, _, _, pid = struct.unpack("hhqqi", answer[:struct.calcsize("hhqqi")])
    return pid if kind != fcntl.F_UNLCK and pid > 0 else None


def _raise_if_in_use(path: Path, error: str) -> None:
    """A database another process (or this one) holds open is in use, not damaged."""
    holder = lock_holder(path)
    if holder is None and "lock hold by current process" not in error:
        return
    if holder is None:
        who = "this process"
    else:
        try:
            argv = (Path("/proc") / str(holder) / "cmdline").read_bytes().split(b"\0")
            command = " ".join(a.decode(errors="replace") for a in argv if a)[:160]
        except OSError:
            command = ""
        who = f"pid {holder}" + (f" ({command})" if command else "")
    raise StoreInUse(
        f"the shard database at {path} is in use by {who}: it is not damaged, and it is "
        "left where it is",
        holder_pid=holder,
        hint="stop that process first (another engine, or a tool that opened the database "
        "for writing); read-only tools (shard inspect, dump, digest) work beside it",
    )


class ShardStore:
    """One shard's RocksDB database."""

    get: Callable[[bytes], bytes | None]
    """The value under a key, or None. RocksDB's own point read, bound per instance: the
    apply path reads twice per record, and a Python method around it added about a fifth
    to each miss (0.85 against 0.68 us in bench/apply.py)."""

    def __init__(self, db: Any, path: Path, *, read_only: bool) -> None:
        self._db = db
        self.get = db.get
        self.path = path
        self.read_only = read_only
        if not read_only:
            from rocksdict import WriteOptions

            self._sync = WriteOptions()
            self._sync.sync = True

    # opening --------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: Path,
        *,
        identity: Identity | None = None,
        create: bool = False,
        read_only: bool = False,
        memory: StoreMemory | None = None,
        lazy_indexes: bool = False,
        mapped: bool = False,
    ) -> ShardStore:
        """Open (or with ``create`` make) the database at ``path``.

        With ``identity`` the database must belong to that shard; a new one is stamped
        with it in a synced write before anything else happens. ``memory``: the process's
        shared memory budget (``nereus.state.memory``), else the database's own.
        ``lazy_indexes``: for a caller that reads a few keys (``shard inspect``), tables'
        indexes and filters are read as reads need them, not all while opening
        (``store_options.shard_options``). A caller making many reads across a large database keeps
        the default. ``mapped`` (read-only): tables read through mmap
        (``store_options.shard_options`` says who may).
        """
        from rocksdict import AccessType, Rdict

        path = Path(path)
        if not (path / "CURRENT").exists():
            if not create or read_only:
                raise NotFound(
                    f"no shard database at {path}",
                    hint="run `nereus shard replay SHARD --empty --into DIR` to build one",
                )
            path.mkdir(parents=True, exist_ok=True)
        if mapped and not read_only:
            raise ValueError("mapped reads are for read-only opens")
        options = shard_options(memory, lazy_indexes=lazy_indexes, mapped=mapped)
        options.create_if_missing(create and not read_only)
        # the column family's options given as well: without them rocksdict opens an
        # existing database with the options saved in its OPTIONS file, and a fresh block
        # cache of its own, so neither the memory budget nor a change made here took effect
        # once a database existed
        families = {"default": options}
        try:
            if read_only:
                db = Rdict(str(path), options=options, column_families=families,
                           access_type=AccessType.read_only())
            else:
                db = Rdict(str(path), options=options, column_families=families)
        except Exception as exc:
            if not read_only:
                _raise_if_in_use(path, str(exc))
            raise StoreError(f"cannot open shard database at {path}: {exc}") from exc
        store = cls(db, path, read_only=read_only)
        if identity is not None:
            store._check_identity(identity)
        return store

    def _check_identity(self, expected: Identity) -> None:
        found = self.identity()
        if found is None:
            if self.read_only:
                raise StoreError(f"the database at {self.path} has no shard identity")
            self.write(identity_writes(expected))
            return
        if (found.route, found.partition) != (expected.route, expected.partition):
            raise StoreError(
                f"the database at {self.path} belongs to shard {found.route}/{found.partition}, "
                f"not {expected.route}/{expected.partition}",
                hint="point --db at the right shard's database",
            )
        if found.schema_version != keys.SCHEMA_VERSION:
            self._migrate(found)

    def _migrate(self, found: Identity) -> None:
        """Bring an older key schema to this build's, one synced batch per step
        (``nereus.state.migrations``); a newer one is refused (a downgrade)."""
        from nereus.state.migrations import plan, step_writes

        steps = plan(found.schema_version)
        if self.read_only:
            raise StoreError(
                f"the database at {self.path} has key schema {found.schema_version}; this "
                f"build reads {keys.SCHEMA_VERSION} once it is migrated",
                hint="`nereus upgrade check` says what changes; the engine migrates at start")
        for step in steps:
            self.write(step_writes(step, found, self.get,
                                   lambda start, end: list(self.scan(start, end))))
            found = msgspec.structs.replace(found, schema_version=step.from_version + 1)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ShardStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # reading --------------------------------------------------------------------------
    def scan(self, start: bytes, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Keys in ``[start, end)`` in key order (RocksDB stops at ``end`` itself)."""
        if end is None:
            items: Iterator[tuple[bytes, bytes]] = self._db.items(from_key=start)
            return items
        from rocksdict import ReadOptions

        bounded = ReadOptions()
        bounded.set_iterate_upper_bound(end)
        return _below(self._db.items(from_key=start, read_opt=bounded), end, bounded)

    def replicated(self, start: bytes = b"\x00", end: bytes | None = None, *,
                   verify_checksums: bool = True) -> Iterator[tuple[bytes, bytes]]:
        """Every replicated pair in key order, read as one bulk pass (what the digest hashes);
        with ``start``/``end``, those in ``[start, end)`` (a range of the digest, ``end``
        at most 0x80).

        A full pass reads each block once: it bypasses the block cache (which it would only
        churn, evicting what point reads need) and reads ahead 2 MiB. About 1.4x faster than
        a plain scan on a 3M-pair shard. Block checksums are verified unless the caller
        checks the files' own checksums anyway (checkpoint verify).
        """
        from rocksdict import ReadOptions

        limit = bytes([keys.REPLICATED_LIMIT])
        bulk = ReadOptions()
        bulk.set_iterate_upper_bound(limit if end is None else min(end, limit))
        bulk.fill_cache(False)  # type: ignore[call-arg]  # the stub omits the argument
        bulk.set_readahead_size(2 << 20)
        bulk.set_verify_checksums(verify_checksums)
        items: Iterator[tuple[bytes, bytes]] = self._db.items(from_key=start, read_opt=bulk)
        return items

    def files(self) -> list[LiveFile]:
        """RocksDB's live table files."""
        return [LiveFile(f["name"], f["size"], f["level"], f["start_key"], f["end_key"],
                         f["num_entries"]) for f in self._db.live_files()]

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self.scan(prefix, keys.prefix_end(prefix))

    def keys_under(self, prefix: bytes) -> Iterator[bytes]:
        """The keys under ``prefix`` in key order (``StateView``)."""
        return (key for key, _ in self.scan_prefix(prefix))

    def identity(self) -> Identity | None:
        raw = self.get(keys.META_IDENTITY)
        return None if raw is None else decode_value(raw, Identity)

    def applied_position(self) -> int | None:
        """Position of the last applied record, or None when nothing was applied."""
        raw = self.get(keys.META_APPLIED)
        return None if raw is None else decode_int(raw)

    def property_int(self, name: str) -> int | None:
        """A RocksDB integer property (None: unknown, or the database is closed)."""
        from rocksdict import DbClosedError

        try:
            value: int | None = self._db.property_int_value(name)
        except DbClosedError:  # a reader on another thread (a scrape) met a close
            return None
        return value

    def wal_bytes(self) -> int:
        """Bytes of the write-ahead log files (``*.log``) in the database directory."""
        total = 0
        for entry in self.path.iterdir():
            if entry.suffix == ".log":
                try:
                    total += entry.stat().st_size
                except FileNotFoundError:  # a log RocksDB just deleted
                    continue
        return total

    def compact(self) -> None:
        """Compact the whole key range now (benchmarks and offline tools; the engine leaves
        compaction to RocksDB)."""
        self._db.compact_range(None, None)

    def start_flush(self) -> None:
        """Ask RocksDB to flush the memtable on its own thread, and return at once.

        ``create_checkpoint`` flushes the memtable itself and holds the GIL until it is
        done (180 ms for a 40 MB memtable here, every other thread of the process stopped):
        a checkpoint taken once this flush has ended (``flush_running``) flushes only what
        was written since."""
        self._db.flush(False)

    def flush_running(self) -> bool:
        """Whether a flush asked for has not ended: a memtable waits to be flushed or is
        being flushed."""
        return bool(self.property_int("rocksdb.num-immutable-mem-table")
                    or self.property_int("rocksdb.num-running-flushes"))

    def create_checkpoint(self, path: Path) -> None:
        """A RocksDB checkpoint of the current state at ``path`` (hard links where possible).

        Taken between two committed WriteBatches it holds exactly one applied position.
        It flushes the memtable first, holding the GIL (``start_flush``).
        """
        from rocksdict import Checkpoint

        self._db.flush_wal(True)
        Checkpoint(self._db).create_checkpoint(str(path))

    # writing --------------------------------------------------------------------------
    def write(self, writes: Mapping[bytes, bytes | None], *, sync: bool = True) -> None:
        """Commit ``writes`` (None deletes) as ONE WriteBatch, fsynced by default."""
        from rocksdict import WriteBatch, WriteOptions

        if self.read_only:
            raise StoreError(f"the database at {self.path} is open read-only")
        batch = WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete  # bound once: a batch holds thousands of keys
        for key, value in writes.items():
            if value is None:
                delete(key)
            else:
                put(key, value)
        self._db.write(batch, self._sync if sync else WriteOptions())
