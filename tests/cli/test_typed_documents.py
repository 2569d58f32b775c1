"""Each command whose ``--json`` document is a msgspec Struct prints exactly what its type
declares: no key the type does not know, every field without a default present, and every
value of the declared type. The man pages' JSON sections come from the same types
(``nereus.cli.json_keys.typed``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from nereus.cli.json_keys import JSON_KEYS
from tests.cli.typed_scenarios_checkpoint import CHECKPOINT_SCENARIOS
from tests.cli.typed_scenarios_cluster import CLUSTER_SCENARIOS
from tests.cli.typed_scenarios_mutation import MUTATION_SCENARIOS
from tests.cli.typed_scenarios_setup import SETUP_SCENARIOS
from tests.cli.typed_scenarios_shard import SHARD_SCENARIOS
from tests.cli.typed_scenarios_upgrade import UPGRADE_SCENARIOS
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.polling import days_ahead, wait_until

WHEN = days_ahead(300)


def _declares(document: dict[str, Any], declared: type[msgspec.Struct]) -> None:
    """The document's keys are the type's (all required ones present), its values of the
    declared types, at every level a Struct describes."""
    fields = msgspec.structs.fields(declared)
    names = {f.encode_name for f in fields}
    assert set(document) <= names, f"keys {set(document) - names} are not in {declared}"
    required = {f.encode_name for f in fields if f.required}
    assert required <= set(document), f"{declared} requires {required - set(document)}"
    msgspec.convert(document, declared)  # every value of its declared type (nested too)


def _scheduled(home: Path, message_id: str) -> dict[str, Any]:
    result = run_nereus("--json", "message", "schedule", "--lane", "local", "--deliver-at", WHEN,
                        "--id", message_id, home=home)
    assert result.code == 0, result.stderr
    doc: dict[str, Any] = result.json()
    return doc


def _command_show(home: Path) -> list[dict[str, Any]]:
    """QUEUED with no engine, APPLIED once one ran."""
    command_id = _scheduled(home, "typed-1")["command_id"]
    queued = run_nereus("--json", "command", "show", command_id, home=home)
    with running_engine(home):
        run_nereus("--json", "message", "show", "typed-1", "--barrier", home=home)
        applied = run_nereus("--json", "command", "show", command_id, home=home)
    return [queued.json(), applied.json()]


def _cancel(home: Path) -> list[dict[str, Any]]:
    """A QUEUED receipt (no engine) and an APPLIED one (--wait)."""
    _scheduled(home, "typed-2")
    _scheduled(home, "typed-3")
    queued = run_nereus("--json", "message", "cancel", "typed-2", home=home)
    with running_engine(home):
        applied = run_nereus("--json", "message", "cancel", "typed-3", "--wait", home=home)
    return [queued.json(), applied.json()]


def _reschedule(home: Path) -> list[dict[str, Any]]:
    _scheduled(home, "typed-4")
    with running_engine(home):
        applied = run_nereus("--json", "message", "reschedule", "typed-4", "--deliver-at",
                             days_ahead(350), "--wait", home=home)
    return [applied.json()]


def _engine_status(home: Path) -> list[dict[str, Any]]:
    """A healthy engine with a scheduled message: shards, lanes, workers, clock."""
    _scheduled(home, "typed-5")
    with running_engine(home):
        run_nereus("--json", "message", "show", "typed-5", "--barrier", home=home)
        status = run_nereus("--json", "engine", "status", home=home)
    assert status.code == 0, status.stdout
    doc: dict[str, Any] = status.json()
    assert doc["shards"] and doc["lanes"] and doc["workers"]
    return [doc]


def _lane_list(home: Path) -> list[dict[str, Any]]:
    """Each row of the array is one lane, held to the row type."""
    with running_engine(home):
        listed = run_nereus("--json", "lane", "list", home=home)
    assert listed.code == 0, listed.stderr
    rows: list[dict[str, Any]] = listed.json()
    assert rows
    return rows


def _message_show_and_list(home: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """message show of a published message (with its attempt) and of a scheduled one, and
    message list of both."""
    _scheduled(home, "typed-6")
    now = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "0s",
                     "--id", "typed-7", home=home)
    assert now.code == 0, now.stderr
    with running_engine(home):
        wait_until("typed-7 published",
                   lambda: run_nereus("--json", "message", "show", "typed-7", home=home)
                 .json().get("state") == "PUBLISHED" or None, 30)
        shown = [run_nereus("--json", "message", "show", mid, "--barrier", home=home).json()
                 for mid in ("typed-6", "typed-7")]
        listed = run_nereus("--json", "message", "list", home=home).json()
    assert shown[1]["attempts"], shown[1]
    return shown, [listed]


def _metrics(home: Path) -> list[dict[str, Any]]:
    """The Prometheus exposition of a running engine, as one document."""
    with running_engine(home):
        shown = run_nereus("--json", "metrics", home=home)
    assert shown.code == 0, shown.stderr
    doc: dict[str, Any] = shown.json()
    assert "nereus_applied_position" in doc["exposition"]
    return [doc]


def _message_show(home: Path) -> list[dict[str, Any]]:
    return _message_show_and_list(home)[0]


def _message_list(home: Path) -> list[dict[str, Any]]:
    return _message_show_and_list(home)[1]


SCENARIOS: dict[str, Callable[[Path], list[dict[str, Any]]]] = {
    "engine status": _engine_status,
    "message show": _message_show,
    "message list": _message_list,
    "lane list": _lane_list,
    "metrics": _metrics,
    "command show": _command_show,
    "message cancel": _cancel,
    "message reschedule": _reschedule,
    **CHECKPOINT_SCENARIOS,
    **SHARD_SCENARIOS,
    **SETUP_SCENARIOS,
    **MUTATION_SCENARIOS,
    **CLUSTER_SCENARIOS,
    **UPGRADE_SCENARIOS,
}


def test_every_typed_document_has_a_scenario() -> None:
    """A command documented by a type is run by this module, so its output is checked."""
    typed = {name for name, doc in JSON_KEYS.items() if doc.source is not None}
    assert typed == set(SCENARIOS)


def _declares_one_of(document: dict[str, Any],
                     forms: tuple[type[msgspec.Struct], ...]) -> None:
    """The document is one of the command's declared forms (the first, or an alternative)."""
    failures: list[str] = []
    for declared in forms:
        try:
            _declares(document, declared)
            return
        except (AssertionError, msgspec.ValidationError) as exc:
            failures.append(f"{declared.__name__}: {exc}")
    raise AssertionError("; ".join(failures))


@pytest.mark.parametrize("command", sorted(SCENARIOS))
def test_the_command_prints_what_its_type_declares(home: Path, command: str) -> None:
    """Run the command as an operator would and hold its JSON to its declared Struct (or,
    for a command with several forms, one of them)."""
    entry = JSON_KEYS[command]
    assert entry.source is not None
    documents = SCENARIOS[command](home)
    assert documents
    for document in documents:
        _declares_one_of(document, (entry.source, *entry.alternatives))


def test_a_failing_command_prints_the_error_document(home: Path) -> None:
    """A command refused (no such message), a usage error and a bad option value each print
    the one error document ``ErrorDocument`` declares, with the process's exit status in it."""
    from nereus.cli.error_document import ErrorDocument

    failures = [run_nereus("--json", "message", "show", "no-such-message", home=home),
                run_nereus("--json", "message", "schedule", "--no-such-option", home=home),
                run_nereus("--json", "lane", "set", "local", "--capacity", "-1", home=home)]
    for failed in failures:
        assert failed.code not in (0, 70), failed.stdout
        document = failed.json()
        _declares(document, ErrorDocument)
        assert document["ok"] is False and document["exit_code"] == failed.code
