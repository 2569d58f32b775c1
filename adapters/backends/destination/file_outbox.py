"""The file destination: one JSON line per publish, fsynced before PUBLISHED.

A line carries the message's ids, lane, generation, ``deliver_at``, ``published_at``, key,
headers, payload (base64 when not UTF-8) and ``mac`` (``nereus.evidence_mac``). A line left
unfinished by a crash is ended before the next batch, so every later line parses. Writers
in several processes (worker processes share lanes) look at the end, repair and write
under an exclusive ``flock``; the fsync runs after it. Classification: the file cannot be
opened -> NOT_PUBLISHED RETRIABLE; a failed write cut back durably -> NOT_PUBLISHED
RETRIABLE, else UNKNOWN; a failed final fsync -> UNKNOWN; PUBLISHED evidence is
``<path>@<byte offset>``; after ``close`` NOT_PUBLISHED LANE_UNAVAILABLE.

A shard's lines are written only under that shard's writer lock (``writer_locks.py``);
a request whose lock another process holds is NOT_PUBLISHED LANE_UNAVAILABLE (nothing
written), and the probe keeps the lane NOT READY until that lock is free. That makes the
destination a ``Fencing`` one (``fencing.py``): a new owner's ``fence`` takes the lock,
syncs the outbox and proves each orphan present or absent.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import stat
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import msgspec

from nereus.adapters.backends.destination.fencing import Fenced, NotFenced, absent_evidence
from nereus.adapters.backends.destination.protocol import (
    DestinationClosed,
    PublishRequest,
    PublishResult,
)
from nereus.adapters.backends.destination.writer_locks import WriterLocks
from nereus.errors import NereusError
from nereus.evidence_mac import ExpectedMac, mac_accepted
from nereus.records import Disposition, Outcome
from nereus.timespec import MAX_TIME_MS, format_time_ms, parse_time_ms

_JSON = msgspec.json.Encoder()  # the bytes json.dumps(separators=(",", ":"),
# ensure_ascii=False) writes, for these values (str, int, None, str maps), several times faster
_SECONDS: dict[int, str] = {}  # epoch second -> "YYYY-MM-DDTHH:MM:SS." (bounded below)


def _time_text(ms: int) -> str:
    """``format_time_ms(ms)``, with the whole-second part formatted once per second."""
    if not 0 <= ms <= MAX_TIME_MS:
        return format_time_ms(ms)
    second = ms // 1000
    prefix = _SECONDS.get(second)
    if prefix is None:
        if len(_SECONDS) >= 4_096:
            _SECONDS.clear()
        prefix = _SECONDS[second] = format_time_ms(second * 1000)[:-4]
    return f"{prefix}{ms % 1000:03d}Z"


def render_line(request: PublishRequest, published_at: str) -> bytes:
    """One outbox line; ``published_at`` is already formatted (one per batch)."""
    template = request.template
    try:
        payload: str = template.payload.decode("utf-8")
        encoding = None
    except UnicodeDecodeError:
        payload = base64.b64encode(template.payload).decode()
        encoding = "base64"
    line = {
        "delay_message_id": template.delay_message_id,
        "attempt_id": request.attempt_id,
        "lane": template.lane,
        "generation": template.generation,
        "deliver_at": _time_text(template.deliver_at_ms),
        "published_at": published_at,
        "key": template.key,
        "headers": template.headers,
        "payload": payload,
        "mac": request.mac,
    }
    if encoding:
        line["payload_encoding"] = encoding
    return _JSON.encode(line) + b"\n"


class FileDestination:
    max_record_bytes: int | None = None  # a line may be as long as the payload limit allows

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = Path(path)
        self._closed = False
        self._writers = WriterLocks(self.path)
        self._contended: set[str] = set()  # shards whose lock another process held at a send
        # a publish and a fence never overlap in this process (a fence proves what a
        # publish still running might yet write: nothing)
        self._writing = threading.Lock()

    def probe(self) -> str | None:
        if self._closed:
            return f"destination {self.name} is closed"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            return f"cannot open {self.path}: {exc.strerror}"
        os.close(fd)
        for shard in sorted(self._contended):  # not READY while another writer holds one
            if (why := self._writers.free(shard)) is not None:
                return why
            self._contended.discard(shard)
        return None

    def publish(
        self, requests: Sequence[PublishRequest], now_ms: Callable[[], int]
    ) -> list[PublishResult]:
        with self._writing:
            if self._closed:
                return self._write(requests, now_ms)
            if any(r.shard and not self._writers.holds(r.shard) for r in requests):
                self._create()  # a lock about to be taken records the outbox it finds
            refused: list[PublishResult] = []
            allowed: list[PublishRequest] = []
            for request in requests:
                why = self._writers.take(request.shard) if request.shard else None
                if why is None:
                    allowed.append(request)
                else:
                    self._contended.add(request.shard)
                    refused.append(PublishResult(
                        request.attempt_id, Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE,
                        f"nothing written to {self.path}: {why}"))
            if not allowed:
                return refused
            results = self._write(allowed, now_ms)
            # a note that fails only weakens the next taker's check of these lines
            with contextlib.suppress(OSError):
                self._writers.note({r.shard for r in allowed if r.shard})
            return refused + results

    def _create(self) -> None:
        """Make the outbox exist (a writer lock records the file it found). Never waits:
        a FIFO without a reader refuses a non-blocking open (ENXIO) instead of blocking."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK,
                             0o644))
        except OSError:
            pass  # the write says why

    def _write(
        self, requests: Sequence[PublishRequest], now_ms: Callable[[], int]
    ) -> list[PublishResult]:
        def every(outcome: Outcome, disposition: Disposition, evidence: str) -> list[PublishResult]:
            return [PublishResult(r.attempt_id, outcome, disposition, evidence) for r in requests]

        if self._closed:
            return every(Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE,
                         f"destination {self.name} is closed: nothing written to {self.path}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            return every(Outcome.NOT_PUBLISHED, Disposition.RETRIABLE,
                         f"open {self.path} failed before any write: {exc.strerror}")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released before the fsync, or by the close
            start = os.fstat(fd).st_size
            if start and os.pread(fd, 1, start - 1) != b"\n":
                # a crash cut an earlier write short: end that fragment so our lines parse
                os.write(fd, b"\n")
                start += 1
            published_at = now_ms()
            stamp = _time_text(published_at)
            lines = [render_line(r, stamp) for r in requests]
            data = b"".join(lines)
            try:
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
            except OSError as exc:
                try:
                    os.ftruncate(fd, start)
                    os.fsync(fd)
                except OSError:
                    return every(Outcome.UNKNOWN, Disposition.NONE,
                                 f"write to {self.path} failed ({exc.strerror}) and the partial "
                                 "write could not be removed")
                return every(Outcome.NOT_PUBLISHED, Disposition.RETRIABLE,
                             f"write to {self.path} failed ({exc.strerror}); partial write removed")
            fcntl.flock(fd, fcntl.LOCK_UN)
            try:
                os.fsync(fd)
            except OSError as exc:
                return every(Outcome.UNKNOWN, Disposition.NONE,
                             f"fsync of {self.path} failed ({exc.strerror}) after writing")
        finally:
            os.close(fd)
        results = []
        offset = start
        for request, line in zip(requests, lines, strict=True):
            results.append(PublishResult(request.attempt_id, Outcome.PUBLISHED, Disposition.NONE,
                                         f"{self.path}@{offset}", published_at))
            offset += len(line)
        return results

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        if self._closed:
            raise DestinationClosed(f"destination {self.name} is closed: no evidence scan")
        return scan_file_evidence(self.path, wanted, since_ms)

    def fence(self, shard: str, wanted: Mapping[str, ExpectedMac], since_ms: int) -> Fenced:
        """Take ``shard``'s writer lock, fsync the outbox and read it from about
        ``since_ms`` on: the ``wanted`` attempts found, and the evidence of the others'
        absence (``fencing.Fencing``). Raises ``NotFenced`` when the lock is held
        elsewhere, a publish of this process still runs, or the outbox may have lost lines
        since the last holder took the lock (rotated, replaced, cut)."""
        if self._closed:
            raise NotFenced(f"destination {self.name} is closed")
        if (odd := _not_a_file(self.path)) is not None:
            raise NotFenced(odd)  # a FIFO or a directory: no lock proves what it holds
        if not self._writing.acquire(timeout=1.0):
            raise NotFenced(f"a publish to {self.path} is still running in this process")
        try:
            self._create()
            why = self._writers.take(shard) or (
                self._writers.continuity(shard) if wanted else None)  # nothing to prove
            if why is not None:
                raise NotFenced(why)
            if not wanted:  # the lock is held and noted: nothing to prove
                return Fenced({}, absent_evidence("file writer lock", "nothing asked"))
            return self._classify(shard, wanted, since_ms)
        finally:
            self._writing.release()

    def _classify(self, shard: str, wanted: Mapping[str, ExpectedMac], since_ms: int) -> Fenced:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise NotFenced(f"cannot open {self.path}: {exc.strerror}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotFenced(f"{self.path} is not a regular file")
            os.fsync(fd)  # what the dead writer left in the page cache is durable now
            size = os.fstat(fd).st_size
        except OSError as exc:
            raise NotFenced(f"cannot sync {self.path}: {exc.strerror}") from None
        finally:
            os.close(fd)
        found = scan_file_evidence(self.path, wanted, since_ms, until_byte=size)
        how = (f"{self.path} synced and read to byte {size} under the writer lock "
               f"{self._writers.lock_path(shard)} (the previous writer's lock was released "
               "and the outbox kept every line it wrote): the attempt's line is not there")
        return Fenced(found, absent_evidence("file writer lock", how))

    def release(self, shard: str) -> None:
        if not self._writing.acquire(timeout=1.0):
            return  # a publish hangs: the lock stays held (no one can prove what it writes)
        try:
            self._writers.release(shard)
            self._contended.discard(shard)
        finally:
            self._writing.release()

    def close(self) -> None:
        self._closed = True  # each publish opens the file; the writer locks are dropped
        self.release_all()

    def release_all(self) -> None:
        if self._writing.acquire(timeout=1.0):
            try:
                self._writers.close()
            finally:
                self._writing.release()


# below this many bytes left, the search for where a time starts reads on line by line
_BISECT_FLOOR = 64 << 10


def first_offset_since(handle: BinaryIO, size: int, since_ms: int) -> int:
    """The offset of a line start at or before the first line published at ``since_ms`` or later
    (lines are appended in publish order, each with its ``published_at``): a binary search
    over byte offsets, so a scan reads what was published since, not the whole file. A
    line it cannot read moves the search towards the file's start (it never skips one)."""
    low, high = 0, size
    while high - low > _BISECT_FLOOR:
        middle = (low + high) // 2
        handle.seek(middle)
        handle.readline()  # the rest of a line cut by the seek
        start = handle.tell()
        published = _published_ms(handle.readline())
        if published is None or published >= since_ms or start >= high:
            high = middle
        else:
            low = start
    return low


def _published_ms(raw: bytes) -> int | None:
    try:
        line = json.loads(raw)
        return parse_time_ms(line["published_at"], field="published_at")
    except (ValueError, KeyError, TypeError, NereusError):
        return None


def scan_file_evidence(path: Path, wanted: Mapping[str, ExpectedMac],
                       since_ms: int | None = None, *,
                       until_byte: int | None = None) -> dict[str, str]:
    """Attempt ids found in an outbox file with the MAC ``wanted`` expects for them, with
    ``path@offset`` evidence; with ``since_ms``, only lines from about that publish time on
    (``first_offset_since``) are read; with ``until_byte``, none that starts after it."""
    found: dict[str, str] = {}
    if not wanted or not path.exists():
        return found
    with open(path, "rb") as handle:
        offset = 0 if since_ms is None else first_offset_since(
            handle, os.fstat(handle.fileno()).st_size, since_ms)
        handle.seek(offset)  # a line's start
        for raw in handle:
            if until_byte is not None and offset >= until_byte:
                break
            try:
                line = json.loads(raw)
            except ValueError:
                line = {}  # a line cut short by a crash
            attempt = line.get("attempt_id") if isinstance(line, dict) else None
            if isinstance(attempt, str) and attempt in wanted and mac_accepted(
                    str(line.get("mac", "")), wanted[attempt]):
                found[attempt] = f"{path}@{offset} (found by evidence scan, MAC verified)"
            offset += len(raw)
    return found


def _not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be fenced as an outbox (it exists and is not a regular file)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot stat {path}: {exc.strerror}"
    return None if stat.S_ISREG(info.st_mode) else f"{path} is not a regular file"
