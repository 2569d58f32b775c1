"""``--output table|json|yaml`` on every command (``--json`` is ``--output json``), anywhere on
the line, for answers and for error documents alike."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli.engine_homes import init_home
from tests.conftest import run_nereus


def test_yaml_and_json_give_the_same_document(tmp_path: Path) -> None:
    """status -o yaml parses to what --json prints; --output json after the command is the
    same as --json before it; NEREUS_OUTPUT=yaml is the default when no flag is given."""
    home = init_home(tmp_path / "home")
    as_json = run_nereus("--json", "status", home=home)
    as_yaml = run_nereus("status", "-o", "yaml", home=home)
    assert as_json.code == as_yaml.code == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)
    assert json.loads(run_nereus("status", "--output=json", home=home).stdout) == \
        json.loads(as_json.stdout)
    from_env = run_nereus("status", home=home, env={"NEREUS_OUTPUT": "yaml"})
    assert yaml.safe_load(from_env.stdout) == json.loads(as_json.stdout)
    table = run_nereus("status", "--output", "table", home=home)
    assert "engine not running" in table.stdout


def test_errors_follow_the_format_and_unknown_formats_are_refused(tmp_path: Path) -> None:
    """A not-found under -o yaml is a YAML error document (exit 3); -o xml exits 2 naming
    the formats."""
    home = init_home(tmp_path / "home")
    missing = run_nereus("message", "show", "nope", "-o", "yaml", home=home)
    assert missing.code == 3
    document = yaml.safe_load(missing.stdout)
    assert document["ok"] is False and document["exit_code"] == 3
    refused = run_nereus("status", "-o", "xml", home=home)
    assert refused.code == 2 and "table, json, yaml" in refused.stderr
