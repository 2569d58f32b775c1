"""The ``nereus shard`` commands run as an operator would, for
``tests/cli/test_typed_documents.py``: each scenario returns the documents the command
printed (each row of ``shard list``, each line of ``shard log``), covering every form its
type declares (with and without the engine, the keys printed only in some cases)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nereus.client import RouteRef, prepare_schedule
from nereus.shard import ShardId
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.homelog import home_log
from tests.polling import days_ahead, wait_until

SHARD = "default/0"
Document = dict[str, Any]


def _json(*args: str, home: Path) -> Any:
    result = run_nereus("--json", *args, home=home)
    assert result.code == 0, result.stderr or result.stdout
    return result.json()


def _schedule(home: Path, message_id: str, *when: str) -> str:
    """Schedule ``message_id``; the shard it went to."""
    receipt = _json("message", "schedule", "--lane", "local", *when, "--id", message_id,
                    home=home)
    shard: str = receipt["shard"]
    return shard


def _engine_ran(home: Path) -> list[Document]:
    """One message due in 300 days and one published, by an engine that has come and gone: the
    database holds lanes, a timeline head, an attempt and an activation. Returns ``shard
    list``'s rows while the engine ran."""
    _schedule(home, "later", "--deliver-at", days_ahead(300))
    _schedule(home, "now", "--delay", "0s")
    with running_engine(home):
        wait_until("message now published",
                   lambda: _json("message", "show", "now", home=home).get("state") == "PUBLISHED"
                   or None, 30)
        rows: list[Document] = _json("shard", "list", home=home)
    return rows


def _live_db(home: Path, *, schedules: int = 2) -> None:
    """``schedules`` messages in default/0's log, in small segments (so there is log to
    prune), and a live database built offline from it (what checkpoints are taken of)."""
    shard, route = ShardId.parse(SHARD), RouteRef("default", 2)
    ids = [f"m{n}" for n in range(schedules * 4) if route.shard_for(f"m{n}") == shard]
    writer = home_log(home, shard, segment_bytes=1024)
    writer.append([prepare_schedule(route, delay_message_id=message_id, lane="local",
                                    deliver_at_ms=10**13).data
                   for message_id in ids[:schedules]])
    writer.close()
    state = home / "state" / SHARD
    shutil.rmtree(state, ignore_errors=True)
    _json("shard", "replay", SHARD, "--empty", "--into", str(state), home=home)


def _checkpoint(home: Path) -> str:
    checkpoint_id: str = _json("checkpoint", "create", SHARD, home=home)["checkpoint_id"]
    return checkpoint_id


def _shard_list(home: Path) -> list[Document]:
    """Offline before any database (NO_STATE), from the engine, offline after (STOPPED)."""
    before = _json("shard", "list", home=home)
    running = _engine_ran(home)
    after = _json("shard", "list", home=home)
    assert {row["state"] for row in before} == {"NO_STATE"}
    assert all("epoch" in row for row in running), running
    assert {row["state"] for row in after} == {"STOPPED"}
    return [*before, *running, *after]


def _shard_inspect(home: Path) -> list[Document]:
    """Every shard after an engine ran (lanes, timeline head, activation), and a database
    elsewhere (--db)."""
    _engine_ran(home)
    shown = [_json("shard", "inspect", f"default/{p}", home=home) for p in (0, 1)]
    assert any(doc["activation"] and doc["timeline_head"] for doc in shown), shown
    elsewhere = home.parent / "elsewhere"
    _json("shard", "replay", SHARD, "--empty", "--into", str(elsewhere), home=home)
    return [*shown, _json("shard", "inspect", SHARD, "--db", str(elsewhere), home=home)]


def _shard_log(home: Path) -> list[Document]:
    """Each record a line; an undecodable record's line carries size_bytes."""
    shard = _schedule(home, "m1", "--delay", "1h")
    _json("message", "cancel", "m1", home=home)
    log = home_log(home, ShardId.parse(shard))
    log.append([b"\x00not a record"])
    log.close()
    result = run_nereus("--json", "shard", "log", shard, home=home)
    assert result.code == 0, result.stderr
    documents = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["kind"] for d in documents if "size_bytes" in d] == ["UNDECODABLE"], documents
    return documents


def _shard_dump(home: Path) -> list[Document]:
    """Every entry of a database an engine wrote, and a truncated dump of one family."""
    _engine_ran(home)
    whole = [_json("shard", "dump", f"default/{p}", "--limit", "10000", home=home)
             for p in (0, 1)]
    some = _json("shard", "dump", SHARD, "--cf", "meta", "--limit", "2", home=home)
    assert some["truncated"] is True
    return [*whole, some]


def _shard_replay(home: Path) -> list[Document]:
    """From empty (to a temporary directory and --into), from a checkpoint, and each
    --compare (the live database, a checkpoint)."""
    _live_db(home)
    checkpoint_id = _checkpoint(home)
    documents = [
        _json("shard", "replay", SHARD, "--empty", home=home),
        _json("shard", "replay", SHARD, "--empty", "--into", str(home.parent / "r"), home=home),
        _json("shard", "replay", SHARD, "--from-checkpoint", checkpoint_id, home=home),
        _json("shard", "replay", SHARD, "--empty", "--compare", "live", home=home),
        _json("shard", "replay", SHARD, "--from-checkpoint", checkpoint_id, "--compare",
              f"checkpoint:{checkpoint_id}", home=home),
    ]
    assert [("from_checkpoint" in d, "match" in d) for d in documents] == [
        (False, False), (False, False), (True, False), (True, True), (True, True)]
    return documents


def _shard_digest(home: Path) -> list[Document]:
    """The live database's digest and a replayed one's (--db)."""
    _live_db(home)
    elsewhere = home.parent / "elsewhere"
    _json("shard", "replay", SHARD, "--empty", "--into", str(elsewhere), home=home)
    return [_json("shard", "digest", SHARD, home=home),
            _json("shard", "digest", SHARD, "--db", str(elsewhere), home=home)]


def _shard_prune(home: Path) -> list[Document]:
    """--dry-run, then the deletion, below the Recovery Floor of a checkpoint."""
    _live_db(home, schedules=60)
    _checkpoint(home)
    documents = [_json("shard", "prune", SHARD, "--dry-run", home=home),
                 _json("shard", "prune", SHARD, home=home)]
    assert documents[0]["deleted"] and documents[1]["deleted"], documents
    return documents


SHARD_SCENARIOS: dict[str, Callable[[Path], list[Document]]] = {
    "shard list": _shard_list,
    "shard inspect": _shard_inspect,
    "shard log": _shard_log,
    "shard dump": _shard_dump,
    "shard replay": _shard_replay,
    "shard digest": _shard_digest,
    "shard prune": _shard_prune,
}
