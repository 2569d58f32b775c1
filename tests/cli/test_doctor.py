"""`nereus doctor`: a clear list of what to fix, exit 1 when anything fails."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_nereus


def test_a_fresh_home_passes(home: Path) -> None:
    """An initialised embedded home: every check passes, exit 0."""
    result = run_nereus("--json", "doctor", home=home)
    assert result.code == 0, result.stdout
    data = result.json()
    assert data["ok"] is True
    names = {c["name"] for c in data["checks"]}
    assert {"config", "home", "disk", "object_store", "clock", "engine"} <= names


def test_a_broken_config_names_the_line(tmp_path: Path) -> None:
    """Invalid nereus.toml: the config check fails naming file and line; exit 1."""
    home = tmp_path / "h"
    home.mkdir()
    (home / "nereus.toml").write_text('[routes.default]\nlog = "file"\npartitions = "two"\n')
    result = run_nereus("--json", "doctor", home=home)
    assert result.code == 1
    (config,) = [c for c in result.json()["checks"] if c["name"] == "config"]
    assert config["ok"] is False and "nereus.toml:3" in config["detail"]


def test_an_unreachable_broker_is_listed_with_a_fix(tmp_path: Path) -> None:
    """A Kafka route pointing nowhere: that broker's check fails and says how to fix it;
    the route's Command Topic is not asked of the same silent broker (a warning says so,
    instead of its log's clients waiting 30 s more), and no librdkafka line reaches
    stderr (it wrote a reconnect line every 50 ms while it waited)."""
    home = tmp_path / "h"
    home.mkdir()
    (home / "nereus.toml").write_text(
        '[routes.default]\nlog = "kafka"\nbootstrap = "127.0.0.1:1"\n\n'
        '[lanes.local]\ndestination = "file"\npath = "outbox/local.jsonl"\n')
    result = run_nereus("doctor", home=home)
    assert result.code == 1
    assert "kafka 127.0.0.1:1" in result.stdout and "fix:" in result.stdout
    assert "rdkafka" not in result.stderr and "%3|" not in result.stderr, result.stderr[:500]
    report = run_nereus("--json", "doctor", home=home).json()
    (topic,) = [c for c in report["checks"] if c["name"].startswith("command_topic ")]
    assert topic["ok"] is False and topic["severity"] == "warning"
    assert "not checked: Kafka at 127.0.0.1:1 did not answer" in topic["detail"]
