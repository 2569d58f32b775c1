"""Parallel implementations of the two expensive verification steps.

The core (``nereus.checkpoint.verify``) has no threads; the engine and the CLI pass these
in. Both compute exactly what the core's defaults compute:

* ``hash_files`` — SHA-256 of every file on a small thread pool (hashlib releases the GIL
  while hashing): one thread per core but one, which is left to the digest — on two
  cores, two hashing threads beside the digest made the whole verify slower, not faster;
* ``pipelined_digest`` — the state digest with iteration and hashing overlapped: this
  thread walks RocksDB and frames chunks, a second thread feeds them to SHA-256;
* ``process_digest`` — the same in a child process (``nereus.adapters.digest_worker``), so
  the scan, which holds the GIL throughout, does not take turns with the file hashing.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from nereus.checkpoint.verify import VerifyReport, file_sha256, read_manifest, verify_directory
from nereus.errors import NereusError
from nereus.state.digest import framed_chunks, new_hash
from nereus.state.store import ShardStore

SMALL_FILE = 1 << 20
# below this many bytes of checkpoint files, verify in this process: starting the digest's
# child interpreter (~0.3-0.5 s) costs more than the whole digest, and a cluster's planned
# move restores a checkpoint on its critical path
SMALL_CHECKPOINT = 32 << 20


def hash_files(paths: list[Path], progress: Callable[[int], None] | None) -> list[tuple[int, str]]:
    workers = max(1, min(8, (os.cpu_count() or 2) - 1))  # a core for the digest
    lock = threading.Lock()

    def advance(n: int) -> None:
        if progress is not None:
            with lock:
                progress(n)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sha256") as pool:
        return list(pool.map(lambda p: file_sha256(p, advance), paths))


def pipelined_digest(store: ShardStore) -> str:
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


def process_digest(directory: Path, timeout_s: float = 3600.0) -> str:
    """The digest of the database at ``directory``, computed by a child interpreter.

    Raises ``RuntimeError`` when the child fails (its stderr says why); callers fall back
    to computing it in this process.
    """
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "nereus.adapters.digest_worker", str(directory)],
        capture_output=True, text=True, timeout=timeout_s, check=False)
    digest = done.stdout.strip()
    if done.returncode != 0 or len(digest) != 64:
        raise RuntimeError(f"digest worker exited {done.returncode}: {done.stderr.strip()}")
    return digest


def verify_parallel(directory: Path, **kwargs: Any) -> VerifyReport:
    """``verify_directory`` with the file hashes and the digest computed at the same time.

    Both start as soon as the manifest is read: the files on threads here, the digest in
    a child process on its own read-only handle; ``verify_directory`` then runs its checks
    in the usual order and consumes the results. If the background digest cannot run (a
    damaged database), it is computed here, and verify_directory's own open reports what
    is wrong, so nothing is lost.
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
    # every small file before the digest thread opens it, the large ones alongside.
    small = {p: file_sha256(p, progress) for p in paths if p.stat().st_size < SMALL_FILE}
    large = [p for p in paths if p not in small]

    def background_digest() -> str:
        return process_digest(directory)

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="verify") as pool:
        files = pool.submit(hash_files, large, progress)
        digest = pool.submit(background_digest)

        def hashed(requested: list[Path], _: Callable[[int], None] | None) -> list[tuple[int, str]]:
            if requested != paths:
                return hash_files(requested, None)
            found = dict(zip(large, files.result(), strict=True)) | small
            return [found[p] for p in paths]

        def digested(store: ShardStore) -> str:
            try:
                return digest.result()
            except Exception:
                return pipelined_digest(store)

        return verify_directory(directory, hash_files=hashed, digest=digested, **kwargs)
