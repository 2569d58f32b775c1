"""Parallel implementations of the two expensive verification steps, which the engine and
the CLI pass to the thread-free core (``nereus.checkpoint.verify``); both compute exactly
what the core's defaults compute.

* ``hash_files``: every file's checksum (BLAKE3, or SHA-256 for format 1) on a thread pool
  of one thread per core but one (hashing releases the GIL);
* ``parallel_digest``: the v2 state digest, the key space cut at leaf boundaries into one
  range per core (``split_points``, balanced by RocksDB's file list), each range digested
  by a child interpreter (``digest_worker``) and combined here; a v1 digest is one stream,
  in one child;
* ``pipelined_digest``: the v1 digest with iteration and hashing on two threads.

Why: ``docs/decisions/0004-parallel-checkpoint-verify.md``.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from nereus.checkpoint.verify import (
    VerifyReport,
    file_hash,
    read_manifest,
    store_digest,
    verify_directory,
)
from nereus.errors import NereusError
from nereus.state import keys
from nereus.state.digest import (
    DIGEST_VERSION,
    LEAF_BYTES,
    combine,
    framed_chunks,
    leaf_digests,
    leaf_of,
    new_hash,
)
from nereus.state.store import LiveFile, ShardStore

SMALL_FILE = 1 << 20
# below this many bytes of checkpoint files, verify in this process: starting the digest's
# child interpreter (~0.1-0.3 s) costs more than the whole digest, and a cluster's planned
# move restores a checkpoint on its critical path
SMALL_CHECKPOINT = 32 << 20
# process_digest(here=True): the caller's range against a child's (it reads with pread, not
# mmap, and its threads hash the files meanwhile); bench/verify.py, 1M-message shard
HERE_SHARE = 0.8


def hash_files(paths: list[Path], progress: Callable[[int], None] | None,
                algorithm: str = "blake3") -> list[tuple[int, str]]:
    workers = max(1, min(8, (os.cpu_count() or 2) - 1))
    lock = threading.Lock()

    def advance(n: int) -> None:
        if progress is not None:
            with lock:
                progress(n)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sha256") as pool:
        return list(pool.map(lambda p: file_hash(p, advance, algorithm), paths))


def pipelined_digest(store: ShardStore) -> str:
    """The v1 digest: this thread walks RocksDB and frames chunks, another hashes them."""
    digest = new_hash()
    chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=16)

    def consume() -> None:
        while (chunk := chunks.get()) is not None:
            digest.update(chunk)

    worker = threading.Thread(target=consume, name="digest", daemon=True)
    worker.start()
    try:
        for chunk in framed_chunks(store.replicated()):
            chunks.put(chunk)
    finally:
        chunks.put(None)
        worker.join()
    return digest.hexdigest()


def split_points(files: Sequence[LiveFile], parts: int, first: float = 1.0) -> list[bytes]:
    """Up to ``parts - 1`` cut keys, ascending, each a leaf boundary, that share the
    replicated key space out about evenly; with ``first``, the first range's share is that
    many times each other's (``first=0.5``: half the others').

    The weights are RocksDB's live files (entries and bytes, as a scan costs by both). A
    share that ends inside a file is cut there by interpolating between the file's first
    and last key (``_between``): a large database has few files (eight of 64 MB for a
    1M-message shard), and cutting only where a file starts left a range up to a file's
    weight from its share. Only the balance depends on this: any cuts give the same digest.
    """
    replicated = sorted((f for f in files if keys.is_replicated(f.start_key)),
                        key=lambda f: f.start_key)
    entries = sum(f.num_entries for f in replicated) or 1
    size = sum(f.size for f in replicated) or 1
    weights = [f.num_entries / entries + f.size / size for f in replicated]
    unit = sum(weights) / (first + parts - 1)
    cuts: list[bytes] = []
    running = 0.0
    for f, weight in zip(replicated, weights, strict=True):
        while len(cuts) < parts - 1 and running + weight > (share := unit * (first + len(cuts))):
            cut = _between(f.start_key, f.end_key, (share - running) / weight)
            if (cuts and cut <= cuts[-1]) or not b"\x00" < cut < bytes([keys.REPLICATED_LIMIT]):
                break  # not past the last cut, and never outside the replicated keys
            cuts.append(cut)
        running += weight
    return cuts


def _between(low: bytes, high: bytes, fraction: float) -> bytes:
    """A leaf boundary ``fraction`` of the way from ``low`` to ``high`` (keys' first
    ``LEAF_BYTES`` bytes read as one big-endian number): a cut inside one file."""
    def number(key: bytes) -> int:
        return int.from_bytes(key[:LEAF_BYTES].ljust(LEAF_BYTES, b"\x00"), "big")

    start, end = number(low), number(high)
    point = start + int((end - start) * fraction)
    return point.to_bytes(LEAF_BYTES, "big") if point > start else leaf_of(low)


def _worker_argv(directory: Path, *extra: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "nereus.adapters.offline.digest_worker", str(directory), *extra]


def process_digest(directory: Path, timeout_s: float = 3600.0, *,
                   version: int = DIGEST_VERSION, parts: int | None = None,
                   here: bool = False) -> str:
    """The digest of the database at ``directory``, computed by child interpreters: v2 by
    one per range (``parts`` of them, default one per core), v1 by one.

    ``here`` (v2): the calling thread digests the first range itself while the children
    digest the others, so one core is not left to an interpreter's start (about 50 ms
    of imports and opening) and the caller's idle wait. It holds the GIL while it scans,
    so only a process with nothing else to run uses it (``nereus checkpoint verify``),
    never the engine. The caller reads without mapped tables (``ShardStore.open``), so
    its range is ``HERE_SHARE`` of a child's.

    Raises ``RuntimeError`` when a child fails (its stderr says why); callers fall back
    to computing it in this process.
    """
    import subprocess

    if version != 2:
        done = subprocess.run(_worker_argv(directory, "--version", str(version)),
                              capture_output=True, text=True, timeout=timeout_s, check=False)
        digest = done.stdout.strip()
        if done.returncode != 0 or len(digest) != 64:
            raise RuntimeError(f"digest worker exited {done.returncode}: {done.stderr.strip()}")
        return digest
    try:
        store = ShardStore.open(directory, read_only=True)
    except NereusError as exc:
        raise RuntimeError(exc.message) from exc
    with store:
        count = parts or max(1, min(8, os.cpu_count() or 1))
        cuts = split_points(store.files(), count, HERE_SHARE if here else 1.0)
        bounds = [b"\x00", *cuts, bytes([keys.REPLICATED_LIMIT])]
        ranges = list(itertools.pairwise(bounds))
        if here and len(ranges) > 1:
            mine, ranges = ranges[0], ranges[1:]
        else:
            mine = None
        children = [subprocess.Popen(_worker_argv(directory, "--range", lo.hex(), hi.hex()),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    for lo, hi in ranges]
        try:
            leaves = [] if mine is None else \
                list(leaf_digests(store.replicated(*mine, verify_checksums=False)))
            failures = []
            for child in children:
                out, err = child.communicate(timeout=timeout_s)
                if child.returncode != 0:
                    failures.append(f"digest worker exited {child.returncode}: "
                                    f"{err.decode(errors='replace').strip()}")
                    continue
                leaves.extend(msgspec.msgpack.decode(out, type=list[tuple[bytes, bytes]]))
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
    if failures:
        raise RuntimeError("; ".join(failures))
    return combine(leaves)


def parallel_store_digest(store: ShardStore, version: int = DIGEST_VERSION) -> str:
    """``store_digest`` of a database directory by ``process_digest``, falling back to
    this process (the same value either way)."""
    try:
        return process_digest(store.path, version=version)
    except (RuntimeError, NereusError, OSError):
        return store_digest(store, version) if version == 2 else pipelined_digest(store)


def verify_parallel(directory: Path, *, digest_here: bool = False,
                    **kwargs: Any) -> VerifyReport:
    """``verify_directory`` with the file hashes and the digest computed at the same time.

    Both start as soon as the manifest is read: the files on threads here, the digest in
    child processes on their own read-only handles (with ``digest_here``, one range in
    this process too: ``process_digest``'s ``here``, for a process with nothing else to
    run); ``verify_directory`` then runs its checks in the usual order and consumes the
    results. If the background digest cannot run (a damaged database), it is computed
    here, and verify_directory's own open reports what is wrong, so nothing is lost.
    """
    try:
        manifest = read_manifest(directory)
    except NereusError:
        return verify_directory(directory, **kwargs)
    paths = [directory / entry.name for entry in manifest.files]
    progress = kwargs.pop("progress", None)
    if not all(p.is_file() for p in paths) or \
            sum(p.stat().st_size for p in paths) < SMALL_CHECKPOINT:
        return verify_directory(directory, progress=progress, **kwargs)
    # Opening the database rewrites small metadata files (rocksdict-config.json): hash
    # every small file before the digest children open it, the large ones alongside.
    algorithm = manifest.file_hash
    small = {p: file_hash(p, progress, algorithm) for p in paths
             if p.stat().st_size < SMALL_FILE}
    large = [p for p in paths if p not in small]
    version = manifest.digest_version

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="verify") as pool:
        digest = pool.submit(process_digest, directory, version=version, here=digest_here)
        files = pool.submit(hash_files, large, progress, algorithm)

        def hashed(requested: list[Path], _: Callable[[int], None] | None,
                   wanted: str) -> list[tuple[int, str]]:
            if requested != paths or wanted != algorithm:
                return hash_files(requested, None, wanted)
            found = dict(zip(large, files.result(), strict=True)) | small
            return [found[p] for p in paths]

        def digested(store: ShardStore, wanted: int) -> str:
            try:
                if wanted == version:
                    return digest.result()
            except Exception:  # computed here instead, below
                pass
            return store_digest(store, wanted) if wanted == 2 else pipelined_digest(store)

        return verify_directory(directory, hash_files=hashed, digest=digested, **kwargs)
