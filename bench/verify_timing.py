"""What ``bench/verify.py`` times: ``nereus shard inspect`` and checkpoint verify.

Every figure is the median of R runs. Verify is timed beside ``sha256sum`` over the same
files, warm in the page cache, and split into its parts (file checksums, opening the
checkpoint, scanning the replicated range, hashing it into the digest), each timed alone.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' terminal, to run the CLI on one

from generated_schedules import IDENTITY, SHARD  # noqa: E402
from installed_cli import cli_environ  # noqa: E402
from nereus.adapters.offline.checkpoint_take import take_local  # noqa: E402
from nereus.checkpoint.manifest import Manifest  # noqa: E402
from nereus.checkpoint.verify import file_hash, file_sha256, verify_directory  # noqa: E402
from nereus.inspection import inspect_store  # noqa: E402
from nereus.state.digest import digest_sorted  # noqa: E402
from nereus.state.store import ShardStore  # noqa: E402
from tests.terminal import on_terminal  # noqa: E402
from verify_shard import BASE_MS  # noqa: E402

TARGET_VERIFY_RATIO = 2.0  # whole verify MB/s over sha256sum's, in the same run
TARGET_INSPECT_HELP_RATIO = 2.0  # shard inspect wall time over `nereus --help`'s
NEREUS = Path(sys.executable).parent / "nereus"


def median_time(fn: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), samples


# --------------------------------------------------------------------------------------
# shard inspect


class InspectFigures(msgspec.Struct, frozen=True):
    command: str
    wall_s: float
    samples_s: list[float]
    in_process_s: float
    nereus_help_s: float
    ratio_to_help: float  # on a terminal 160 columns wide (a pseudo-terminal)
    # the same line through a pipe (COLUMNS unset)
    piped_wall_s: float
    piped_ratio_to_help: float
    messages_by_state: dict[str, int]
    estimated_keys: int | None
    disk: dict[str, object]
    met: bool


def measure_inspect(db: Path, repeat: int, scratch: Path) -> InspectFigures:
    home = scratch / "home"  # an empty home: no config, so no log lag is looked up
    home.mkdir()
    argv = [str(NEREUS), "--home", str(home), "shard", "inspect", "default/0", "--db", str(db)]
    piped_env = cli_environ()
    piped_env.pop("COLUMNS", None)
    env = {**piped_env, "TERM": "xterm-256color"}

    def run_cli() -> None:  # as an operator sees it: on a terminal, bold headers
        code, _, err = on_terminal(argv, env, columns=160)
        if code != 0:
            raise RuntimeError(f"{' '.join(argv)} on a terminal: exit {code}: {err}")

    def run_piped() -> None:
        subprocess.run(argv, check=True, capture_output=True, env=piped_env)

    def run_help() -> None:
        subprocess.run([str(NEREUS), "--help"], check=True, capture_output=True, env=env)

    run_cli()  # warm: page cache, .pyc files (cli_environ lets Python write them)
    run_piped()
    run_help()
    # alternated, so all see the same load on a shared machine (at least 5 of each)
    samples, piped_samples, help_samples = [], [], []
    for _ in range(max(repeat, 5)):
        samples.append(median_time(run_cli, 1)[0])
        piped_samples.append(median_time(run_piped, 1)[0])
        help_samples.append(median_time(run_help, 1)[0])
    wall, help_wall = statistics.median(samples), statistics.median(help_samples)
    piped_wall = statistics.median(piped_samples)
    report_json = json.loads(subprocess.run(
        [argv[0], "--json", *argv[1:]], check=True, capture_output=True, env=env).stdout)

    def in_process() -> None:
        with ShardStore.open(db, identity=IDENTITY, read_only=True) as store:
            inspect_store(store)

    inproc, _ = median_time(in_process, repeat)
    return InspectFigures(command=" ".join(argv), wall_s=wall, samples_s=samples,
                          in_process_s=inproc, nereus_help_s=help_wall,
                          ratio_to_help=wall / help_wall, piped_wall_s=piped_wall,
                          piped_ratio_to_help=piped_wall / help_wall,
                          messages_by_state=report_json["messages_by_state"],
                          estimated_keys=report_json["db"]["estimated_keys"],
                          disk=report_json["disk"],
                          met=wall < TARGET_INSPECT_HELP_RATIO * help_wall)


# --------------------------------------------------------------------------------------
# checkpoint verify: the timed rounds


@dataclass(frozen=True, slots=True)
class Taken:
    """A checkpoint of the shard in a scratch directory, and how long taking it took."""

    directory: Path
    manifest: Manifest
    seconds: float
    expected: dict[str, str]  # each file's SHA-256, to check sha256sum's answer

    @property
    def paths(self) -> list[Path]:
        return [self.directory / f.name for f in self.manifest.files]


def take_checkpoint(db: Path, staging: Path) -> Taken:
    with ShardStore.open(db, identity=IDENTITY) as store:
        started = time.perf_counter()
        directory, manifest = take_local(store, SHARD, staging, checkpoint_id="cp-bench",
                                         parent=None, now_ms=BASE_MS)
        seconds = time.perf_counter() - started
    expected = {f.name: file_sha256(directory / f.name)[1] for f in manifest.files}
    return Taken(directory, manifest, seconds, expected)


def sha256sum(paths: list[Path], expected: dict[str, str]) -> None:
    """coreutils' ``sha256sum`` over the files, in one subprocess, checked."""
    out = subprocess.run(["sha256sum", "--", *map(str, paths)], check=True,
                         capture_output=True, text=True).stdout
    got = {Path(line.split(maxsplit=1)[1]).name: line.split()[0]
           for line in out.splitlines()}
    if got != expected:
        raise SystemExit("sha256sum disagrees with the manifest")


def checksums_only(paths: list[Path], algorithm: str) -> None:
    for path in paths:
        file_hash(path, None, algorithm)


def verify(directory: Path) -> None:
    """What `nereus checkpoint verify` runs: file hashing on threads, the digest's key
    ranges in child processes (``nereus.adapters.offline.digest_worker``) and the first range in
    this process (``digest_here``), one range per core."""
    from nereus.adapters.offline.parallel_verify import verify_parallel

    report = verify_parallel(directory, expected_shard=(SHARD.route, SHARD.partition),
                             digest_here=True)  # as `nereus checkpoint verify` calls it
    if not report.ok:
        raise SystemExit(f"verify failed: {report.document()}")


def verify_core(directory: Path) -> None:
    """The core's single-threaded reference implementation."""
    report = verify_directory(directory, expected_shard=(SHARD.route, SHARD.partition))
    if not report.ok:
        raise SystemExit(f"verify failed: {report.document()}")


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its waited-for children."""
    import resource

    own, children = (resource.getrusage(resource.RUSAGE_SELF),
                     resource.getrusage(resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def time_rounds(taken: Taken, repeat: int) -> tuple[dict[str, list[float]],
                                                    dict[str, list[float]]]:
    """Wall and CPU seconds of each way of checking the files, round by round, in this
    order. CPU seconds do not depend on what else the machine runs: on a shared machine
    (where Linux shares the cores out per session) they show what the cores would do."""
    paths, expected, directory = taken.paths, taken.expected, taken.directory
    ways: list[tuple[str, Callable[[], None]]] = [
        ("sha256sum", lambda: sha256sum(paths, expected)),
        ("checksums", lambda: checksums_only(paths, taken.manifest.file_hash)),
        ("sha256_python", lambda: checksums_only(paths, "sha256")),
        ("verify", lambda: verify(directory)),
        ("verify_core", lambda: verify_core(directory)),
    ]
    rounds: dict[str, list[float]] = {name: [] for name, _ in ways}
    cpu: dict[str, list[float]] = {name: [] for name, _ in ways}
    for _ in range(repeat):
        for name, fn in ways:
            started, started_cpu = time.perf_counter(), cpu_seconds()
            fn()
            rounds[name].append(time.perf_counter() - started)
            cpu[name].append(cpu_seconds() - started_cpu)
    return rounds, cpu


# --------------------------------------------------------------------------------------
# checkpoint verify: where its time goes


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyParts:
    open_s: float
    pairs: int
    pair_bytes: int
    scan_s: float
    digest_s: float
    parallel_digest_s: float


def time_parts(taken: Taken, repeat: int) -> VerifyParts:
    """Opening the checkpoint, scanning its replicated range, recomputing its digest."""
    directory = taken.directory

    def open_only() -> None:
        ShardStore.open(directory, read_only=True).close()

    def scan_only() -> int:
        with ShardStore.open(directory, read_only=True) as image:
            return sum(1 for _ in image.replicated())

    def digest_only() -> None:
        with ShardStore.open(directory, read_only=True) as image:
            digest = digest_sorted(image.replicated())
        if digest != taken.manifest.digest:
            raise SystemExit("digest disagrees with the manifest")

    def logical_bytes() -> int:
        with ShardStore.open(directory, read_only=True) as image:
            return sum(len(k) + len(v) for k, v in image.replicated())

    def parallel_digest() -> None:
        from nereus.adapters.offline.parallel_verify import process_digest

        if process_digest(directory, here=True) != taken.manifest.digest:
            raise SystemExit("the parallel digest disagrees with the manifest")

    open_s, _ = median_time(open_only, repeat)
    pairs = scan_only()
    pair_bytes = logical_bytes()
    scan_s, _ = median_time(scan_only, repeat)
    digest_s, _ = median_time(digest_only, repeat)
    parallel_s, _ = median_time(parallel_digest, repeat)
    return VerifyParts(open_s=open_s, pairs=pairs, pair_bytes=pair_bytes, scan_s=scan_s,
                       digest_s=digest_s, parallel_digest_s=parallel_s)


# --------------------------------------------------------------------------------------
# checkpoint verify: the figures


class Throughput(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Median seconds over the checkpoint's bytes; the ratio is to sha256sum's MB/s."""

    seconds: float
    mb_per_s: float
    ratio_to_sha256sum: float | None = None
    samples_s: list[float]
    cpu_s: float  # median CPU seconds (this process and its children)


class Parts(msgspec.Struct, frozen=True):
    checksums: float
    db_open: float
    scan_replicated: float
    digest_with_open: float
    digest_hashing: float
    parallel_digest: float
    rest: float


class VerifyFigures(msgspec.Struct, frozen=True):
    files: int
    bytes: int
    replicated_pairs: int
    replicated_pair_bytes: int
    take_local_s: float
    sha256sum: Throughput
    checksums: Throughput
    checksum: str  # the checksum the checkpoint's manifest lists (its format's)
    sha256_python: Throughput
    verify: Throughput
    verify_core: Throughput
    parts_s: Parts
    met: bool


def _throughput(samples: list[float], cpu: list[float], mb: float,
                sha_mb_s: float | None) -> Throughput:
    seconds = statistics.median(samples)
    mb_per_s = mb / seconds
    return Throughput(seconds=seconds, mb_per_s=mb_per_s, samples_s=samples,
                      ratio_to_sha256sum=None if sha_mb_s is None else mb_per_s / sha_mb_s,
                      cpu_s=statistics.median(cpu))


def measure_verify(db: Path, repeat: int, scratch: Path) -> VerifyFigures:
    taken = take_checkpoint(db, scratch / "staging")
    for path in taken.paths:  # warm the page cache: both sides then read from memory
        file_sha256(path)
    rounds, cpu = time_rounds(taken, repeat)
    parts = time_parts(taken, repeat)
    shutil.rmtree(taken.directory)
    mb = sum(f.size for f in taken.manifest.files) / 1e6
    sha = _throughput(rounds["sha256sum"], cpu["sha256sum"], mb, None)
    checksums = _throughput(rounds["checksums"], cpu["checksums"], mb, sha.mb_per_s)
    whole = _throughput(rounds["verify"], cpu["verify"], mb, sha.mb_per_s)
    return VerifyFigures(
        files=len(taken.manifest.files), bytes=sum(f.size for f in taken.manifest.files),
        replicated_pairs=parts.pairs, replicated_pair_bytes=parts.pair_bytes,
        take_local_s=taken.seconds,
        sha256sum=sha, checksums=checksums, checksum=taken.manifest.file_hash,
        sha256_python=_throughput(rounds["sha256_python"], cpu["sha256_python"], mb,
                                  sha.mb_per_s),
        verify=whole,
        verify_core=_throughput(rounds["verify_core"], cpu["verify_core"], mb, sha.mb_per_s),
        parts_s=Parts(checksums=checksums.seconds, db_open=parts.open_s,
                      scan_replicated=parts.scan_s, digest_with_open=parts.digest_s,
                      digest_hashing=parts.digest_s - parts.scan_s,
                      parallel_digest=parts.parallel_digest_s,
                      # what is left of the whole verify; clamped, as noise can make it < 0
                      rest=max(0.0, whole.seconds - checksums.seconds - parts.digest_s)),
        met=whole.mb_per_s / sha.mb_per_s >= TARGET_VERIFY_RATIO,
    )
