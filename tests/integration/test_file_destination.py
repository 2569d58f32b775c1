"""The file destination passes the destination contract.

Each test's outbox is a JSON-lines file under its own ``tmp_path``; the unreachable target
is a path whose parent directory is a regular file, so opening it fails for root too.
"""

from __future__ import annotations

from pathlib import Path

from nereus.config import LaneSettings
from nereus.engine.destinations.file import FileDestination
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
