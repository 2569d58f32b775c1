"""SVG snapshots of the overview at 80x24 and 120x40 over fixed data.

Nothing on screen comes from a clock (times are the engine's, from the fake documents) and
the fake source always ends in the same state, so the picture is the same on every run.
A changed picture fails the test and leaves the new SVG beside the test's temporary files;
look at both, and if the new one is right, regenerate the committed files explicitly:

    NEREUS_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/tui/test_snapshots.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nereus.tui.app import make_app
from tests.tui.fakes import FakeSource, RecordingRunner, snapshots
from tests.tui.pilot import run, until

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("NEREUS_UPDATE_SNAPSHOTS") == "1"
TICKS = 5


def _overview_svg(size: tuple[int, int]) -> str:
    pictures: list[str] = []

    async def scenario() -> None:
        app = make_app(FakeSource(snapshots(TICKS)), RecordingRunner(), operator="tester")
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: app.state.history.ticks == TICKS, what="fake data")
            pictures.append(app.export_screenshot(title="nereus dashboard"))

    run(scenario)
    return pictures[0]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_overview_snapshot(size: tuple[int, int], tmp_path: Path) -> None:
    """The overview over the fixed fake data looks exactly like the committed SVG."""
    name = f"overview_{size[0]}x{size[1]}.svg"
    expected_path = SNAPSHOTS / name
    actual = _overview_svg(size)
    if UPDATE:
        expected_path.write_text(actual)
        return
    assert expected_path.exists(), (
        f"no snapshot {expected_path}; create it with NEREUS_UPDATE_SNAPSHOTS=1")
    if actual != expected_path.read_text():
        (tmp_path / name).write_text(actual)
        pytest.fail(f"the overview at {size[0]}x{size[1]} changed: compare {tmp_path / name} "
                    f"with {expected_path}; regenerate with NEREUS_UPDATE_SNAPSHOTS=1 if the "
                    "new picture is right")


def test_snapshots_are_deterministic() -> None:
    """Two renders of the same data are byte-identical (no clock, no random ids)."""
    assert _overview_svg((80, 24)) == _overview_svg((80, 24))
