"""Every input is checked at the edge and every failure is a clear error: the byte, the
field and the limit, a JSON document under ``--json``, never a traceback."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from nereus.errors import ExitCode
from tests.cli.engine_homes import write_batch
from tests.conftest import CliResult, run_nereus


def _schedule(home: Path, *args: str) -> CliResult:
    return run_nereus("--json", "message", "schedule", "--lane", "local", *args, home=home)


def _refused(result: CliResult, *words: str) -> dict[str, Any]:
    assert result.code == ExitCode.USAGE, (result.code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    doc = result.json()
    assert isinstance(doc, dict), doc
    assert doc["ok"] is False and doc["exit_code"] == 2
    for word in words:
        assert word in str(doc["error"]), doc
    return doc


@pytest.mark.parametrize(("message_id", "words"), [
    ("", ("must not be empty",)),
    ("evil\x1b]0;owned\x07", ("control character", "U+001B", "character 4")),
    ("tab\there", ("U+0009",)),
    ("rtl\u202eexe.txt", ("U+202E",)),
    ("x" * 257, ("257 bytes", "limit of 256")),
])
def test_bad_ids_are_refused_naming_the_character(home: Path, message_id: str,
                                                  words: tuple[str, ...]) -> None:
    """An empty, control-character or over-long id is refused (exit 2) naming what is wrong."""
    _refused(_schedule(home, "--delay", "1m", "--id", message_id), *words)


@pytest.mark.parametrize("when", ["99999999999999999", "10000-01-01T00:00:00Z",
                                  "9" * 5000, "2026-13-01T00:00:00Z", "1e400", "-5"])
def test_times_outside_what_the_store_keeps_are_refused(home: Path, when: str) -> None:
    """A time past 9999, a malformed one or a negative one is a usage error naming the flag."""
    _refused(_schedule(home, "--deliver-at", when), "--deliver-at")


RANGE = "1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z"


@pytest.mark.parametrize("when", ["10000-01-01T00:00:00Z", "+10000-01-01T00:00:00Z",
                                  "10000-01-01", "1e30", "-5", "99999999999999999",
                                  "0001-01-01T00:00:00Z"])
def test_a_time_out_of_range_says_the_range_however_it_is_written(home: Path,
                                                                  when: str) -> None:
    """A year past 9999, an epoch in exponent form, a negative epoch, a huge one or a year
    before 1970 is refused saying the range, not "is not a time"."""
    doc = _refused(_schedule(home, "--deliver-at", when), "--deliver-at",
                   f"is outside the times Nereus Delay can keep ({RANGE})")
    assert "is not a time" not in doc["error"]


def test_a_time_that_is_not_one_says_what_to_give_and_the_range(home: Path) -> None:
    """Text that is no time, or an epoch with a fraction, is refused with the forms to give
    and the range."""
    for when, words in (("soon", "is not a time"),
                        ("1795982400000.5", "epoch milliseconds are a whole number")):
        doc = _refused(_schedule(home, "--deliver-at", when), words)
        assert RANGE in doc["hint"], doc


def test_a_delay_past_the_last_representable_time_is_refused(home: Path) -> None:
    """A delay that lands past 9999-12-31, or an absurdly long one, is refused."""
    _refused(_schedule(home, "--delay", "99999999999d"), "--delay", "9999-12-31")
    _refused(_schedule(home, "--delay", "1" * 100 + "d"), "--delay")


def test_headers_are_sized_client_side(home: Path) -> None:
    """Too many headers, or too many header bytes, are refused before anything is queued."""
    many = [arg for n in range(65) for arg in ("--header", f"h{n}=v")]
    _refused(_schedule(home, "--delay", "1m", *many), "65 headers", "at most 64")
    _refused(_schedule(home, "--delay", "1m", "--header", "big=" + "v" * 20_000),
             "bytes; at most 16384")


def test_the_home_still_lists_after_refusals(home: Path) -> None:
    """A refused schedule leaves nothing in the log: the home still lists."""
    _refused(_schedule(home, "--deliver-at", "99999999999999999"))
    listed = run_nereus("--json", "shard", "list", home=home)
    assert listed.code == 0
    assert all(s["log_end_position"] in (0, None, 1) for s in listed.json())


def test_every_bad_batch_line_is_reported_and_nothing_is_queued(home: Path,
                                                                tmp_path: Path) -> None:
    """Every bad line of a batch is named with its line number, and nothing of it is queued."""
    lines: list[dict[str, object] | str] = [
        {"lane": "local", "delay": "1m", "payload": "ok"},
        "not json",
        {"lane": "local", "delay": "1m", "id": "bad\x1bid"},
        {"lane": "local", "deliver_at": "99999999999999999"},
        {"lane": "local", "delay": "1m", "id": 5},
        "[" * 100_000,
        {"lane": "local", "delay": "1m", "payload": "fine too"},
    ]
    batch = write_batch(tmp_path / "batch.jsonl", lines)
    doc = _refused(run_nereus("--json", "message", "schedule", "--batch", str(batch),
                              home=home), "5 bad lines", "nothing was queued")
    assert [item["line"] for item in doc["bad_lines"]] == [2, 3, 4, 5, 6]
    assert doc["bad_line_count"] == 5
    ends = run_nereus("--json", "shard", "list", home=home).json()
    assert all(not s["log_end_position"] for s in ends)


def test_bad_lines_beyond_the_limit_are_counted(home: Path, tmp_path: Path) -> None:
    """Past 20 bad lines the rest are counted, not listed."""
    batch = write_batch(tmp_path / "batch.jsonl", ["nope"] * 45)
    doc = _refused(run_nereus("--json", "message", "schedule", "--batch", str(batch),
                              home=home), "45 bad lines", "and 25 more")
    assert len(doc["bad_lines"]) == 20


def test_a_lone_surrogate_is_refused_not_a_crash(home: Path, tmp_path: Path) -> None:
    """Text that is not Unicode (a lone surrogate) is a usage error, not a crash."""
    batch = tmp_path / "batch.jsonl"
    batch.write_text('{"lane": "local", "delay": "1m", "key": "\\ud800"}\n')
    _refused(run_nereus("--json", "message", "schedule", "--batch", str(batch), home=home),
             "key", "not valid Unicode")


def test_stored_times_out_of_range_are_printed_not_raised() -> None:
    """Formatting a stored time outside the representable range prints it, never raises."""
    from nereus.timespec import MAX_TIME_MS, format_time_ms

    assert format_time_ms(MAX_TIME_MS) == "9999-12-31T23:59:59.999Z"
    assert format_time_ms(MAX_TIME_MS + 1) == f"{MAX_TIME_MS + 1} ms (out of range)"
    assert format_time_ms(-1) == "-1 ms (out of range)"
    assert format_time_ms((1 << 63) - 1).endswith("(out of range)")


def test_an_unexpected_exception_is_one_line_a_crash_file_and_exit_70(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bug is one line on stderr, a crash file with the traceback, the JSON error document
    and exit 70."""
    from nereus.cli import main as cli_main
    from nereus.cli.context import Env

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug nobody expected")

    monkeypatch.setattr(Env, "shard", broken)  # a command body that blows up
    with pytest.raises(SystemExit) as ended:
        cli_main.main(["--home", str(home), "--json", "shard", "digest", "default/0"])
    assert ended.value.code == 70
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["ok"] is False and doc["exit_code"] == 70
    assert "RuntimeError" in doc["error"] and "a bug nobody expected" in doc["error"]
    crash = Path(doc["crash_file"])
    assert crash.parent == home / "log"
    assert "Traceback" in crash.read_text() and "a bug nobody expected" in crash.read_text()
    assert "Traceback" not in err
    assert err.count("\n") <= 2  # the error line and its hint


def _raw_request(sock_path: Path, request: bytes, timeout: float = 10) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(sock_path))
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data and b'"error"' in data:
                break
        return data


def test_admin_api_numbers_are_checked(engine_home: Path) -> None:
    """NaN, infinite, negative or malformed numbers in admin requests are a 400 naming the
    parameter, answered at once."""
    sock = engine_home / "run" / "admin.sock"
    for query in ("interval=nan", "interval=inf", "interval=-1", "interval=abc"):
        began = time.monotonic()
        answer = _raw_request(sock, f"GET /v1/feed?{query} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.0 400") or answer.startswith(b"HTTP/1.1 400"), answer
        assert b"interval" in answer
        assert time.monotonic() - began < 5
    answer = _raw_request(sock, b"GET /v1/messages?limit=1e999 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b" 400 " in answer.split(b"\r\n")[0] and b"limit" in answer
    body = json.dumps({"records": [{"shard": "default/0", "data": ""}],
                       "wait_ms": float("nan")}, allow_nan=True).encode()
    answer = _raw_request(sock, b"POST /v1/commands HTTP/1.1\r\nHost: x\r\nContent-Length: "
                          + str(len(body)).encode() + b"\r\n\r\n" + body)
    assert b" 400 " in answer.split(b"\r\n")[0] and b"wait_ms" in answer
