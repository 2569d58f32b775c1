"""Scenarios of ``tests/cli/test_typed_documents.py`` for the commands that set a home up
and run it: ``init`` (and ``init --from``), ``quickstart``, ``doctor``, ``completion``,
``engine start|stop`` and ``playbook list|show|run`` (and ``run --dry-run``). Each runs the
command as an operator would and returns the documents it printed (each row of an array)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import run_nereus
from tests.daemon import running_engine, start_engine, stop_engine

Document = dict[str, Any]


def _json(*args: str, home: Path, code: int = 0, timeout: float = 120) -> Any:
    result = run_nereus("--json", *args, home=home, timeout=timeout)
    assert result.code == code, (args, result.code, result.stdout, result.stderr)
    return result.json()


def _init(home: Path) -> list[Document]:
    """init --force over the fixture's home, init --from it into a new home (the
    alternative form, with a copied file log), and init --join a cluster (a node's home)."""
    from tests.cli.cluster_homes import initialised_cluster

    written = _json("init", "--force", "--partitions", "2", home=home)
    copied = _json("init", "--from", str(home), "--copy-log", home=home.parent / "copied")
    assert copied["from"] == str(home) and len(copied["copied_logs"]) == 2, copied
    (home.parent / "cluster").mkdir()
    url = initialised_cluster(home.parent / "cluster")
    joined = _json("init", "--join", url, "--node-id", "n1", home=home.parent / "node")
    return [written, copied, joined]


def _quickstart(home: Path) -> list[Document]:
    """The whole demo once, in the fixture's home: published messages, receipts, replays."""
    report = _json("quickstart", home=home, timeout=300)
    assert report["ok"] and report["published"] and report["receipts"], report
    return [report]


def _doctor(home: Path) -> list[Document]:
    """A healthy home, then one readable by others (a failed warning that names its fix)."""
    healthy = _json("doctor", home=home)
    os.chmod(home, 0o755)
    loose = _json("doctor", home=home)
    assert any(not c["ok"] and c["fix"] for c in loose["checks"]), loose
    return [healthy, loose]


def _completion(home: Path) -> list[Document]:
    return [_json("completion", shell, home=home) for shell in ("bash", "zsh", "fish")]


def _engine_start(home: Path) -> list[Document]:
    with running_engine(home) as started:
        return [started]


def _engine_logs(home: Path) -> list[Document]:
    """The log of an engine that ran and stopped: everything, and one shard's lines."""
    with running_engine(home):
        pass
    return [_json("engine", "logs", home=home),
            _json("engine", "logs", "--shard", "default/0", "--level", "info", home=home)]


def _status(home: Path) -> list[Document]:
    """Offline (the engine stopped) and online."""
    offline = _json("status", home=home)
    assert offline["engine_running"] is False and offline["healthy"] is False, offline
    with running_engine(home):
        online = _json("status", home=home)
    assert online["engine_running"] is True, online
    return [offline, online]


def _engine_stop(home: Path) -> list[Document]:
    """With no engine (nothing stopped, no pid) and with one running (stopped, its pid)."""
    idle = _json("engine", "stop", home=home)
    assert idle == {"running": False, "stopped": False}, idle
    start_engine(home)
    try:
        stopped = _json("engine", "stop", "--timeout", "20", home=home, timeout=60)
    finally:
        stop_engine(home)  # a no-op when the engine stopped above
    assert stopped["stopped"] and stopped["pid"], stopped
    return [idle, stopped]


# offline steps: the first passes, the second runs once per item, the third fails its
# check (no log holds that many records) with guidance, the last is not run; its wait is
# seen only in a dry run
PLAYBOOK = '''
description = "Typed documents: a step passes, one runs per item, one fails, one waits."

[vars.want]
description = "records the log must hold"
type = "int"
default = 1000

[[steps]]
id = "schedule"
title = "Schedule a message"
run = ["message", "schedule", "--lane", "local", "--delay", "1h", "--payload", "x"]
post = ['output.evidence == "QUEUED"']

[[steps]]
id = "each"
title = "List the shards once per item"
for_each = "[1, 2]"
run = ["shard", "list"]

[[steps]]
id = "count"
title = "The log holds enough records"
run = ["shard", "list"]
post = ["output[0].log_end_position > want"]
on_failure = "the log ends at {output[0].log_end_position}"

[[steps]]
id = "later"
title = "Not reached"
run = ["shard", "list"]
wait = { until = "output[0].lag == 0", timeout = "5s", interval = "100ms" }
'''


def _write_playbooks(home: Path) -> None:
    folder = home / "playbooks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "typed.toml").write_text(PLAYBOOK)
    (folder / "unusable.toml").write_text('[[steps]]\nid = "x"\n')


def _playbook_list(home: Path) -> list[Document]:
    """The shipped playbooks and the home's own, one of them unusable (its error)."""
    _write_playbooks(home)
    rows: list[Document] = _json("playbook", "list", home=home)
    assert {r["name"] for r in rows} >= {"typed", "unusable", "drain-and-close-lane"}
    assert next(r for r in rows if r["name"] == "unusable")["error"], rows
    return rows


def _playbook_show(home: Path) -> list[Document]:
    """A shipped playbook with required variables and a wait step, and the home's own."""
    _write_playbooks(home)
    return [_json("playbook", "show", name, home=home)
            for name in ("drain-and-close-lane", "typed")]


def _playbook_run(home: Path) -> list[Document]:
    """A run that stops at a failed step (exit 1: ok, failed and not_run steps), the plan
    --resume would follow (--dry-run: steps done before), and a fresh plan."""
    _write_playbooks(home)
    report = _json("playbook", "run", "typed", home=home, code=1)
    assert [s["status"] for s in report["steps"]] == ["ok", "ok", "failed", "not_run"], report
    resumed = _json("playbook", "run", "typed", "--resume", "--dry-run", home=home)
    assert resumed["resume_from"] == "count", resumed
    fresh = _json("playbook", "run", "typed", "--dry-run", "--var", "want=1", home=home)
    return [report, resumed, fresh]


SETUP_SCENARIOS: dict[str, Callable[[Path], list[Document]]] = {
    "init": _init,
    "quickstart": _quickstart,
    "doctor": _doctor,
    "completion": _completion,
    "engine start": _engine_start,
    "engine stop": _engine_stop,
    "engine logs": _engine_logs,
    "status": _status,
    "playbook list": _playbook_list,
    "playbook show": _playbook_show,
    "playbook run": _playbook_run,
}
