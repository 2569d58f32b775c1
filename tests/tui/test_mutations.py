"""Dashboard mutations: the reason rule, the exact CLI command run, and how its JSON
answer (or failure) is reported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nereus.tui.mutations import (
    CliMutationRunner,
    LaneMutation,
    MutationOutcome,
    cli_command,
    describe_outcome,
    lane_argv,
    reason_problem,
)

CLOSE = LaneMutation(action="close", lane="payments", reason="broker maintenance")

FAKE_CLI = """
import json, sys
args = sys.argv[1:]
if "--reason" in args and args[args.index("--reason") + 1] == "fail":
    print(json.dumps({"ok": False, "error": "the engine is not running", "hint": "start it",
                      "exit_code": 4}))
    sys.exit(4)
print(json.dumps({"kind": "LANE_GATE", "target": args[args.index("lane") + 2],
                  "operator": "alice", "operator_reason": args[args.index("--reason") + 1],
                  "idempotency_key": "k", "dry_run": False, "argv": args,
                  "receipts": [{"shard": "default/0", "source_position": 7}],
                  "result": {"result": "APPLIED"}}))
"""


def test_a_reason_is_required() -> None:
    """Blank reasons are refused with a message; anything else is accepted."""
    assert reason_problem("") is not None
    assert reason_problem("   \t") is not None
    assert reason_problem("broker maintenance") is None


def test_the_cli_command_is_the_documented_one() -> None:
    """`nereus --home H --json lane close LANE --reason R --yes --wait`, nothing more."""
    argv = lane_argv(["nereus"], Path("/srv/home"), CLOSE)
    assert argv == ["nereus", "--home", "/srv/home", "--json", "lane", "close", "payments",
                    "--reason", "broker maintenance", "--yes", "--wait"]
    command = cli_command()
    assert command[0] == str(Path(sys.executable).parent / "nereus") or command[:2] == [
        sys.executable, "-c"]


def test_runner_runs_the_cli_and_keeps_its_json(tmp_path: Path) -> None:
    """The runner passes home, lane and reason to the CLI and returns its one document."""
    script = tmp_path / "fake_cli.py"
    script.write_text(FAKE_CLI)
    runner = CliMutationRunner(tmp_path / "home", command=[sys.executable, str(script)])
    outcome = runner.run(CLOSE)
    assert outcome.ok and outcome.document is not None
    assert outcome.document["argv"] == ["--home", str(tmp_path / "home"), "--json", "lane",
                                        "close", "payments", "--reason", "broker maintenance",
                                        "--yes", "--wait"]
    assert describe_outcome(outcome) == (
        "information", "lane close payments", "APPLIED; receipts default/0@7; as alice")


def test_runner_reports_the_cli_error_document(tmp_path: Path) -> None:
    """A failing CLI's exit status and JSON error (with hint) become an error notice."""
    script = tmp_path / "fake_cli.py"
    script.write_text(FAKE_CLI)
    runner = CliMutationRunner(tmp_path, command=[sys.executable, str(script)])
    outcome = runner.run(LaneMutation(action="open", lane="local", reason="fail"))
    assert outcome.exit_code == 4
    assert describe_outcome(outcome) == (
        "error", "lane open local",
        "failed (exit 4): the engine is not running — start it")


def test_runner_reports_a_missing_or_hung_cli(tmp_path: Path) -> None:
    """A CLI that cannot start, or does not finish in time, is an error, not a crash."""
    missing = CliMutationRunner(tmp_path, command=[str(tmp_path / "no-such-nereus")]).run(CLOSE)
    assert not missing.ok and "could not run" in describe_outcome(missing)[2]
    slow = CliMutationRunner(tmp_path, command=[sys.executable, "-c",
                                                "import time; time.sleep(30)"],
                             timeout_s=0.5).run(CLOSE)
    assert not slow.ok and "did not finish" in describe_outcome(slow)[2]


def test_rejected_results_are_warnings_and_non_json_errors_use_stderr() -> None:
    """REJECTED/STALE (exit 0) warn with their reason; an error without JSON shows stderr."""
    rejected = MutationOutcome(mutation=CLOSE, exit_code=0, document={
        "result": {"result": "REJECTED", "reason": "NO_REASON"}, "receipts": []})
    assert describe_outcome(rejected) == ("warning", "lane close payments",
                                          "REJECTED (NO_REASON)")
    queued = MutationOutcome(mutation=CLOSE, exit_code=0, document=json.loads(
        '{"result": null, "receipts": [{"shard": "default/1", "source_position": 3}]}'))
    assert describe_outcome(queued)[2] == "QUEUED; receipts default/1@3"
    stale = MutationOutcome(mutation=CLOSE, exit_code=0, document={
        "result": "STALE", "operator": "bob", "receipts": [
            {"shard": "default/0", "source_position": 4, "result": "STALE",
             "reason": "PRECONDITION_CHANGED"}]})
    assert describe_outcome(stale) == (
        "warning", "lane close payments",
        "STALE (PRECONDITION_CHANGED); receipts default/0@4; as bob")
    crashed = MutationOutcome(mutation=CLOSE, exit_code=2, document=None,
                              stderr="Usage: ...\nError: No such command 'close'.\n")
    assert describe_outcome(crashed) == ("error", "lane close payments",
                                         "failed (exit 2): Error: No such command 'close'.")
