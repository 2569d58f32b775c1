"""Incremental checkpoints as an operator sees them: an engine's ``checkpoint create`` at
feature level 2 uploads only new files (``uploaded_bytes``), at level 1 the whole image;
``checkpoint prune`` of the full parent leaves the later ones verifying and restoring."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.integration.test_checkpoints import schedule_many


def _create(home: Path) -> dict[str, int | str]:
    result = run_nereus("--json", "checkpoint", "create", "default/0", home=home)
    assert result.code == 0, result.stdout + result.stderr
    data: dict[str, int | str] = result.json()
    return data


@pytest.mark.parametrize("level", [1, 2])
def test_engine_checkpoints_are_incremental_only_at_level_2_and_survive_their_parent(
        tmp_path: Path, level: int) -> None:
    """Checkpoints with a few messages between them: at level 2 each after the first
    uploads a small part of its image, at level 1 all of it. At level 2, pruning four to
    three deletes the first (the full one); the newest still verifies, restores, and the
    Recovery Set verifies."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    raised = run_nereus("upgrade", "finalize", "--to", str(level), "--reason", "t", "--yes",
                        home=home)
    assert raised.code == 0, raised.stdout + raised.stderr
    taken = []
    with running_engine(home):
        schedule_many(home, 300)
        taken.append(_create(home))
        for n in range(3 if level == 2 else 1):
            schedule_many(home, 3, start=1_000 + 10 * n)
            taken.append(_create(home))
    first = taken[0]
    assert first["uploaded_bytes"] == first["size_bytes"]
    for later in taken[1:]:
        uploaded, size = int(later["uploaded_bytes"]), int(later["size_bytes"])
        assert uploaded < size / 2 if level == 2 else uploaded == size, (level, later)
    if level == 1:
        return
    pruned = run_nereus("--json", "checkpoint", "prune", "default/0", "--keep", "3", "--yes",
                        home=home)
    assert pruned.code == 0 and pruned.json()["deleted"] == [first["checkpoint_id"]]
    newest = str(taken[-1]["checkpoint_id"])
    assert run_nereus("checkpoint", "verify", newest, home=home).code == 0
    restored = run_nereus("--json", "checkpoint", "restore", newest, "--into",
                          str(tmp_path / "restored"), home=home)
    assert restored.code == 0 and restored.json()["digest"] == taken[-1]["digest"]
    assert run_nereus("recovery-set", "verify", "default/0", home=home).code == 0
