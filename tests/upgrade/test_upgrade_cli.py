"""``nereus upgrade status|finalize|check`` as an operator runs them: the feature level is
raised only when every node supports it, never lowered, and a build below a home's level
is refused (``upgrade check`` exit 1, ``engine start`` refused naming both). This build
supports level 2; the level above it is the test-only one (``NEREUS_FEATURE_LEVEL_TESTING=1``
makes a build claim it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nereus.features import TEST_LEVEL
from tests.cli.cluster_homes import initialised_cluster, simulated
from tests.conftest import run_nereus
from tests.upgrade.release_build import build_release, release

TESTING = {"NEREUS_FEATURE_LEVEL_TESTING": "1"}
REASON = ("--reason", "all nodes upgraded", "--yes")


def _json(*args: str, home: Path, code: int = 0, env: dict[str, str] | None = None) -> Any:
    result = run_nereus("--json", *args, home=home, env=env)
    assert result.code == code, (args, result.code, result.stdout, result.stderr)
    return result.json()


def test_a_home_level_is_raised_once_and_a_lower_build_is_refused(tmp_path: Path) -> None:
    """On a single home: finalize at the level in force changes nothing; a level above
    the build's is refused; a build claiming level 3 raises it; then a level-2 build's
    `upgrade check` answers no (exit 1) naming both levels, its engine refuses to start,
    and its finalize cannot lower the level."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    same = _json("upgrade", "finalize", "--to", "1", *REASON, home=home)
    assert (same["result"], same["to_level"]) == ("UNCHANGED", 1)
    above = _json("upgrade", "finalize", "--to", "3", *REASON, home=home, code=1)
    assert "this build supports feature level 2, not 3" in above["error"]
    raised = _json("upgrade", "finalize", *REASON, home=home, env=TESTING)
    assert (raised["result"], raised["from_level"], raised["to_level"]) == ("RAISED", 1, 3)
    status = _json("upgrade", "status", home=home, env=TESTING)
    assert (status["feature_level"], status["reason"]) == (3, "all nodes upgraded")
    check = _json("upgrade", "check", home=home, code=1)
    assert check["ok"] is False
    assert "the home is at feature level 3; this build" in check["refusals"][0]
    started = run_nereus("--json", "engine", "start", "--timeout", "30", home=home)
    assert started.code != 0
    assert f"supports feature level 2; the home {home} is at feature level 3" in \
        started.stdout + started.stderr
    lower = _json("upgrade", "finalize", "--to", "1", *REASON, home=home, env=TESTING,
                  code=1)
    assert "never lowered" in lower["error"]
    assert _json("upgrade", "check", home=home, env=TESTING)["ok"] is True


def test_a_home_raised_above_level_1_is_refused_by_0_1_0(tmp_path: Path) -> None:
    """0.1.0 knows no levels: finalize writes ``[features] level`` into the home's
    nereus.toml too, and 0.1.0 (built from its commit) refuses to start there, naming the
    table, while this build starts as before; below level 2 0.1.0 starts on it."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    build = build_release(release("0.1.0"), tmp_path / "release")
    old = run_nereus("--json", "doctor", home=home, executable=str(build.nereus),
                     env=build.environ())
    assert "unknown table" not in old.stdout + old.stderr, old.stdout
    _json("upgrade", "finalize", *REASON, home=home, env=TESTING)
    assert (home / "nereus.toml").read_text().endswith(f"[features]\nlevel = {TEST_LEVEL}\n")
    refused = run_nereus("--json", "engine", "start", "--timeout", "30", home=home,
                         executable=str(build.nereus), env=build.environ())
    assert refused.code == 2 and "unknown table [features]" in refused.stdout, refused.stdout
    assert _json("upgrade", "check", home=home, env=TESTING)["ok"] is True


def test_a_cluster_level_waits_for_every_node(tmp_path: Path) -> None:
    """On a cluster: a live node of a level-1 build (as 0.1.0 nodes report, by not
    reporting) blocks finalize, named in status and in the refusal; once it is gone the
    level is raised, and status shows it with who raised it and why."""
    url = initialised_cluster(tmp_path)
    op = tmp_path / "operator"
    with simulated(url) as sim:
        old = sim.node("n1")
        old.own("default/0")
        status = _json("upgrade", "status", "--coordinator", url, home=op, env=TESTING)
        assert (status["scope"], status["feature_level"], status["build_level"]) == \
            ("cluster", 1, 3)
        assert [(n["node_id"], n["feature_level"]) for n in status["nodes"]] == [("n1", 1)]
        assert status["blockers"] == ["node n1 supports feature level 1, below 3"]
        refused = _json("upgrade", "finalize", "--coordinator", url, *REASON, home=op,
                        env=TESTING, code=1)
        assert "node n1 supports feature level 1, below 3" in refused["error"]
        old.session.close()
    raised = _json("upgrade", "finalize", "--coordinator", url, "--as", "alice", *REASON,
                   home=op, env=TESTING)
    assert (raised["result"], raised["to_level"], raised["late"]) == ("RAISED", 3, [])
    status = _json("upgrade", "status", "--coordinator", url, home=op, env=TESTING)
    assert (status["feature_level"], status["raised_by"], status["blockers"]) == \
        (3, "alice", [])
