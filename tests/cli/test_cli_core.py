"""The first operator commands, run as an operator would: installed `nereus`, fresh home."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nereus.shard import partition_for
from tests.conftest import run_nereus


def test_init_writes_the_config_and_refuses_to_overwrite(tmp_path: Path) -> None:
    """init writes nereus.toml (route default on the file log, lane local); twice needs --force."""
    home = tmp_path / "h"
    first = run_nereus("--json", "init", "--partitions", "3", home=home)
    assert first.code == 0, first.stderr
    data = first.json()
    assert data["shards"] == ["default/0", "default/1", "default/2"]
    assert data["lanes"][0]["lane"] == "local"
    assert data["lanes"][0]["path"] == str(home / "outbox" / "local.jsonl")
    text = (home / "nereus.toml").read_text()
    assert "[routes.default]" in text and "[lanes.local]" in text
    again = run_nereus("init", home=home)
    assert again.code == 1 and "already exists" in again.stderr
    assert run_nereus("init", "--force", home=home).code == 0


def test_schedule_prints_a_queued_receipt(home: Path) -> None:
    """schedule --json gives the receipt keys; the shard is the stable hash of the id."""
    result = run_nereus("message", "schedule", "--lane", "local", "--delay", "30s",
                        "--payload", "hello", "--id", "order-1", "--header", "a=b", "--json",
                        home=home)
    assert result.code == 0, result.stderr
    data = result.json()
    assert data["delay_message_id"] == "order-1"
    assert data["shard"] == f"default/{partition_for('order-1', 2)}"
    assert data["evidence"] == "QUEUED"
    assert isinstance(data["source_position"], int) and data["command_id"]
    second = run_nereus("--json", "message", "schedule", "--lane", "local",
                        "--deliver-at", "2030-01-01T00:00:00Z", "--id", "order-1b", home=home)
    assert second.code == 0, second.stderr


def test_cancel_and_reschedule_print_receipts(home: Path) -> None:
    """cancel and reschedule queue to the message's shard and print QUEUED receipts."""
    run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--id", "m1", home=home)
    cancel = run_nereus("--json", "message", "cancel", "m1", home=home)
    assert cancel.code == 0 and cancel.json()["evidence"] == "QUEUED"
    assert cancel.json()["kind"] == "CANCEL"
    moved = run_nereus("--json", "message", "reschedule", "m1", "--deliver-at", "1900000000000",
                       home=home)
    # position 0 of every partition holds the route identity
    assert moved.code == 0 and moved.json()["source_position"] == 3


def test_usage_errors_exit_2_with_a_clear_message(home: Path) -> None:
    """Bad times and flag combinations exit 2 and say what to do."""
    cases = [
        (["--deliver-at", "tomorrow"], "not a time"),
        (["--deliver-at", "2030-01-01T00:00:00"], "no time zone"),
        (["--delay", "5 minutes"], "not a duration"),
        (["--delay", "5m", "--deliver-at", "1900000000000"], "exactly one"),
        (["--delay", "5m", "--header", "novalue"], "K=V"),
    ]
    for extra, words in cases:
        result = run_nereus("message", "schedule", "--lane", "local", *extra, home=home)
        assert result.code == 2, (extra, result.stderr)
        assert words in result.stderr, (extra, result.stderr)


def test_parser_errors_under_json_print_one_json_document(home: Path) -> None:
    """Unknown options, commands and bad values: exit 2, one JSON error document on stdout
    (with --json anywhere on the line or NEREUS_OUTPUT=json) and nothing on stderr; without
    --json, Click's message on stderr and nothing on stdout."""
    cases = [
        (("--json", "message", "schedule", "--lane", "local", "--bogus"), None,
         "No such option: --bogus", "nereus message schedule --help"),
        (("frob", "--json"), None, "No such command 'frob'", "nereus --help"),
        (("init", "--partitions", "abc"), {"NEREUS_OUTPUT": "json"}, "--partitions",
         "nereus init --help"),
    ]
    for args, env, words, hint in cases:
        result = run_nereus(*args, home=home, env=env)
        assert result.code == 2, (args, result.stderr)
        document = result.json()
        assert document["ok"] is False and document["exit_code"] == 2, document
        assert words in document["error"] and hint in document["hint"], document
        assert result.stderr == ""
    plain = run_nereus("message", "schedule", "--bogus", home=home)
    assert plain.code == 2 and plain.stdout == "" and "No such option" in plain.stderr


def test_an_error_under_json_is_one_document_and_nothing_else(home: Path) -> None:
    """With --json (or -o yaml, or NEREUS_OUTPUT=json) an error is reported once: the error
    document on stdout, nothing on stderr; without it, once on stderr, nothing on stdout."""
    import yaml

    cases = [(("--json", "message", "schedule", "--lane", "local", "--delay", "1m", "--id",
               " x"), None, 2),
             (("--json", "message", "schedule", "--lane", "nope", "--delay", "1m"), None, 3),
             (("message", "cancel", "m", "--command-id", ""), {"NEREUS_OUTPUT": "json"}, 2)]
    for args, env, code in cases:
        result = run_nereus(*args, home=home, env=env)
        assert result.code == code, (args, result.stdout, result.stderr)
        document = result.json()
        assert document["ok"] is False and document["exit_code"] == code, document
        assert result.stderr == "", (args, result.stderr)
    as_yaml = run_nereus("-o", "yaml", "message", "schedule", "--lane", "nope", "--delay",
                         "1m", home=home)
    assert as_yaml.code == 3 and as_yaml.stderr == ""
    assert yaml.safe_load(as_yaml.stdout)["exit_code"] == 3
    human = run_nereus("message", "schedule", "--lane", "nope", "--delay", "1m", home=home)
    assert human.code == 3 and human.stdout == ""
    assert human.stderr.startswith("error: no lane 'nope'"), human.stderr


def test_missing_targets_exit_3(home: Path, tmp_path: Path) -> None:
    """Unknown lane, missing config, unknown shard and a missing database exit 3."""
    lane = run_nereus("message", "schedule", "--lane", "nope", "--delay", "1m", home=home)
    assert lane.code == 3 and "no lane 'nope'" in lane.stderr
    nohome = run_nereus("message", "cancel", "x", home=tmp_path / "empty")
    assert nohome.code == 3 and "init` first" in nohome.stderr
    shard = run_nereus("shard", "replay", "default/9", "--empty", home=home)
    assert shard.code == 3
    db = run_nereus("shard", "inspect", "default/0", "--db", str(tmp_path / "nodb"), home=home)
    assert db.code == 3


def test_wait_without_an_engine_exits_4(home: Path) -> None:
    """--wait needs APPLIED evidence from the engine: exit 4 when none runs."""
    result = run_nereus("message", "schedule", "--lane", "local", "--delay", "1m", "--wait",
                        home=home)
    assert result.code == 4 and "engine" in result.stderr


def test_replay_digest_and_inspect_agree(home: Path, tmp_path: Path) -> None:
    """Replay builds a database; digest and inspect read it offline and agree with the log."""
    ids = [f"m{n}" for n in range(12)]
    for mid in ids:
        assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h",
                          "--id", mid, home=home).code == 0
    shard = f"default/{partition_for('m0', 2)}"
    mine = [mid for mid in ids if f"default/{partition_for(mid, 2)}" == shard]
    run_nereus("message", "cancel", mine[0], home=home)
    into = tmp_path / "replayed"
    replay = run_nereus("--json", "shard", "replay", shard, "--empty", "--into", str(into),
                        home=home)
    assert replay.code == 0, replay.stderr
    replayed = replay.json()
    assert replayed["records_applied"] == len(mine) + 2  # + the identity and the cancel
    digest = run_nereus("shard", "digest", shard, "--db", str(into), "--json", home=home).json()
    assert digest["digest"] == replayed["digest"]
    assert digest["applied_position"] == len(mine) + 1
    inspect = run_nereus("shard", "inspect", shard, "--db", str(into), "--json", home=home)
    assert inspect.code == 0, inspect.stderr
    data = inspect.json()
    assert data["shard"] == shard and data["applied_position"] == len(mine) + 1
    assert data["messages_by_state"]["SCHEDULED"] == len(mine) - 1
    assert data["messages_by_state"]["CANCELLED"] == 1
    assert set(data["messages_by_state"]) == {"SCHEDULED", "PUBLISHING", "PUBLISHED", "CANCELLED",
                                              "EXPIRED", "UNCERTAIN", "FAILED"}
    assert data["open_obligations"] == 0
    assert data["timeline_head"].endswith("Z") and data["lag"] == 0
    assert [lane["lane"] for lane in data["lanes"]] == ["local"]
    again = run_nereus("--json", "shard", "replay", shard, "--empty", "--into", str(into),
                       home=home)
    assert again.code == 1 and "not empty" in again.json()["error"]
    forced = run_nereus("--json", "shard", "replay", shard, "--empty", "--into", str(into),
                        "--force", home=home)
    assert forced.json()["digest"] == replayed["digest"]


def test_replay_to_a_position_stops_there(home: Path) -> None:
    """--to POS applies records up to and including POS."""
    for n in range(4):
        run_nereus("message", "schedule", "--lane", "local", "--delay", f"{n + 1}h", "--id", "x",
                   "--route", "default", home=home)
    shard = f"default/{partition_for('x', 2)}"
    result = run_nereus("--json", "shard", "replay", shard, "--empty", "--to", "2", home=home)
    assert result.code == 0 and result.json()["applied_position"] == 2
    assert result.json()["records_applied"] == 3  # the identity and two schedules


def test_json_flag_and_home_work_anywhere_and_from_the_environment(home: Path) -> None:
    """--json after the subcommand, NEREUS_OUTPUT=json and NEREUS_HOME all work."""
    after = run_nereus("message", "schedule", "--lane", "local", "--delay", "1m", "--json",
                       home=home)
    assert after.json()["evidence"] == "QUEUED"
    env = run_nereus("message", "schedule", "--lane", "local", "--delay", "1m",
                     env={"NEREUS_OUTPUT": "json", "NEREUS_HOME": str(home)})
    assert env.code == 0 and env.json()["evidence"] == "QUEUED"


def test_errors_in_json_mode_are_one_json_document(home: Path) -> None:
    """With --json an error is still exactly one JSON document on stdout."""
    result = run_nereus("--json", "message", "schedule", "--lane", "nope", "--delay", "1m",
                        home=home)
    assert result.code == 3
    data = result.json()
    assert data["ok"] is False and "nope" in data["error"]


def test_help_does_not_import_heavy_or_network_modules() -> None:
    """`nereus --help` leaves textual, boto3, broker clients and rocksdict unimported."""
    code = (
        "import sys\n"
        "from nereus.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = {'textual', 'boto3', 'confluent_kafka', 'pulsar', 'rocksdict', 'structlog'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
