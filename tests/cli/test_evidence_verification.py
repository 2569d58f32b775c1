"""Evidence is authenticated: a destination record counts only with this attempt's MAC.

Records the destinations write carry ``HMAC-SHA256(route key, delayMessageId, generation,
attemptId)``. ``attempt resolve --published --evidence PATH@OFFSET`` fetches that record and
refuses it unless its attempt id and MAC match; the evidence scan ignores a record with the
right attempt id but the wrong MAC; free text needs ``--unverified`` and is recorded so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nereus.adapters.home.route_secrets import route_key
from nereus.evidence_mac import evidence_mac
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.polling import wait_until
from tests.uncertain import make_unknown_attempt


def ok(*args: str, home: Path) -> Any:
    result = run_nereus("--json", *args, home=home, timeout=60)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def landed(outbox: Path, attempt: str, message: str, mac: str) -> int:
    """Append a published record of ``attempt`` to the outbox; returns its byte offset."""
    outbox.parent.mkdir(parents=True, exist_ok=True)
    offset = outbox.stat().st_size if outbox.exists() else 0
    line = {"delay_message_id": message, "attempt_id": attempt, "lane": "local",
            "generation": 1, "payload": "x", "mac": mac}
    with open(outbox, "a") as handle:
        handle.write(json.dumps(line) + "\n")
    return offset


def home_with_unknown(tmp_path: Path, attempt: str, message: str,
                      evidence_interval_s: float) -> Path:
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    config = home / "nereus.toml"
    config.write_text(config.read_text() +
                      f"\n[engine]\nevidence_interval_s = {evidence_interval_s}\n")
    make_unknown_attempt(home, message, attempt)
    return home


def test_attempt_resolve_checks_the_record_the_evidence_names(tmp_path: Path) -> None:
    """A record with the attempt id but a forged MAC is refused (exit 1), so is another
    line; the record with the route key's MAC settles the attempt, recorded as verified."""
    home = home_with_unknown(tmp_path, "ghost-9", "order-9", evidence_interval_s=3600)
    outbox = home / "outbox" / "local.jsonl"
    forged = landed(outbox, "ghost-9", "order-9", "0" * 64)
    key = route_key(home, "default")
    genuine = landed(outbox, "ghost-9", "order-9", evidence_mac(key, "order-9", 1, "ghost-9"))
    other = landed(outbox, "someone-else", "order-1", evidence_mac(key, "order-1", 1,
                                                                     "someone-else"))
    with running_engine(home):
        for offset, why in ((forged, "evidence MAC does not verify"),
                            (other, "is not attempt ghost-9's record")):
            refused = run_nereus("--json", "attempt", "resolve", "ghost-9", "--published",
                                 "--evidence", f"{outbox}@{offset}", "--reason", "found it",
                                 "--yes", home=home)
            assert refused.code == 1, refused.stdout
            assert why in json.loads(refused.stdout)["error"]
        assert ok("message", "show", "order-9", home=home)["state"] == "UNCERTAIN"
        done = ok("attempt", "resolve", "ghost-9", "--published", "--evidence",
                  f"{outbox}@{genuine}", "--reason", "found it", "--yes", "--wait", home=home)
        assert done["result"] == "APPLIED"
        shown = ok("message", "show", "order-9", home=home)
        assert shown["state"] == "PUBLISHED"
        (attempt,) = shown["attempts"]
        assert f"(verified): verified {outbox}@{genuine}: attempt id and evidence MAC match" \
            in attempt["evidence"]


def test_the_evidence_scan_ignores_a_record_without_the_attempts_mac(tmp_path: Path) -> None:
    """The scan searches, finds only a forged record, settles nothing; once the genuine
    record lands it settles the attempt PUBLISHED with that record as evidence."""
    home = home_with_unknown(tmp_path, "ghost-7", "order-7", evidence_interval_s=0.2)
    outbox = home / "outbox" / "local.jsonl"
    landed(outbox, "ghost-7", "order-7", "f" * 64)
    with running_engine(home):
        def searched() -> dict[str, Any] | None:
            found = ok("attempt", "list", "--state", "unknown", home=home)
            return found[0]["evidence_search"] if found else None

        search = wait_until("an evidence search of ghost-7", searched, 20)
        assert search["found"] is None and search["error"] is None
        assert ok("message", "show", "order-7", home=home)["state"] == "UNCERTAIN"
        key = route_key(home, "default", create=False)
        genuine = landed(outbox, "ghost-7", "order-7",
                         evidence_mac(key, "order-7", 1, "ghost-7"))
        wait_until("the scan to settle ghost-7",
                   lambda: ok("message", "show", "order-7", home=home)["state"] == "PUBLISHED", 20)
        (attempt,) = ok("message", "show", "order-7", home=home)["attempts"]
        assert f"{outbox}@{genuine} (found by evidence scan, MAC verified)" in \
            attempt["evidence"]


def test_free_text_and_not_published_need_unverified(tmp_path: Path) -> None:
    """Free text cannot be checked and no record proves absence: both exit 2 without
    --unverified; with it, the evidence is recorded as unverified."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    make_unknown_attempt(home, "order-8", "ghost-8")
    with running_engine(home):
        for args in (("--published", "--evidence", "the consumer saw it"),
                     ("--not-published", "--evidence", "the topic has no such record")):
            refused = run_nereus("attempt", "resolve", "ghost-8", *args, "--reason", "r",
                                 "--yes", home=home)
            assert refused.code == 2 and "--unverified" in refused.stderr, refused.stderr
        done = ok("attempt", "resolve", "ghost-8", "--not-published", "--evidence",
                  "the topic has no such record", "--unverified", "--reason", "checked",
                  "--yes", "--wait", home=home)
        assert done["result"] == "APPLIED"
        (attempt,) = ok("message", "show", "order-8", home=home)["attempts"]
        assert "(unverified): the topic has no such record" in attempt["evidence"]
