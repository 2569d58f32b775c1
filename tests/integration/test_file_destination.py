"""The file destination passes the destination contract.

Each test's outbox is a JSON-lines file under its own ``tmp_path``; the unreachable target
is a path whose parent directory is a regular file, so opening it fails for root too.
"""

from __future__ import annotations

from pathlib import Path

from nereus.adapters.backends.destination.file_outbox import FileDestination
from nereus.config import LaneSettings
from tests.integration.destination_contract import DestinationContract, Down


class TestFileDestination(DestinationContract):
    """The JSON-lines outbox keeps every promise of the destination contract."""

    def make_destination(self, tmp_path: Path) -> FileDestination:
        return FileDestination("contract", tmp_path / "outbox" / "contract.jsonl")

    def make_down(self, tmp_path: Path) -> Down:
        blocker = tmp_path / "blocker"
        blocker.write_text("a file where the outbox directory should be")
        path = blocker / "out.jsonl"
        return Down(FileDestination("contract", path), str(path))

    def lane_settings(self, tmp_path: Path) -> LaneSettings:
        return LaneSettings(name="contract", destination="file",
                            path=str(tmp_path / "outbox" / "contract.jsonl"))


def _outbox(path: Path, lines: int) -> list[int]:
    """An outbox of ``lines`` lines published 1 ms apart from 10**12; each line's offset."""
    from nereus.adapters.backends.destination.file_outbox import render_line
    from nereus.adapters.backends.destination.protocol import PublishRequest
    from nereus.publish import PublishTemplate
    from nereus.timespec import format_time_ms

    offsets, offset, chunks = [], 0, []
    for n in range(lines):
        template = PublishTemplate(delay_message_id=f"m{n}", generation=1, lane="local",
                                   deliver_at_ms=10**12, action_at_ms=10**12, key=None,
                                   headers={}, payload=b"x" * 40)
        line = render_line(PublishRequest(f"a{n}", template, f"mac{n}"),
                           format_time_ms(10**12 + n))
        offsets.append(offset)
        offset += len(line)
        chunks.append(line)
    path.write_bytes(b"".join(chunks))
    return offsets


def test_an_evidence_scan_reads_from_about_its_window_not_the_whole_outbox(
        tmp_path: Path) -> None:
    """20,000 lines: a scan from the 15,000th line's publish time finds an attempt after it
    and not one from the first line (its search starts within 64 KiB before the window's
    first line, found by a binary search over publish times); without a window both are
    found."""
    from nereus.adapters.backends.destination.file_outbox import (
        first_offset_since,
        scan_file_evidence,
    )

    path = tmp_path / "outbox.jsonl"
    offsets = _outbox(path, 20_000)
    wanted = {"a0": "mac0", "a19000": "mac19000"}
    since = 10**12 + 15_000
    assert set(scan_file_evidence(path, wanted, since)) == {"a19000"}
    assert set(scan_file_evidence(path, wanted)) == {"a0", "a19000"}
    with open(path, "rb") as handle:
        start = first_offset_since(handle, path.stat().st_size, since)
    assert start in offsets and start <= offsets[15_000]
    assert offsets[15_000] - start <= 64 << 10


def test_a_window_before_the_first_line_reads_the_whole_outbox(tmp_path: Path) -> None:
    """A scan from before the first publish starts at offset 0."""
    from nereus.adapters.backends.destination.file_outbox import first_offset_since

    path = tmp_path / "outbox.jsonl"
    _outbox(path, 5_000)
    with open(path, "rb") as handle:
        assert first_offset_since(handle, path.stat().st_size, 0) == 0
