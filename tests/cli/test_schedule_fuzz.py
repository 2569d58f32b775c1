"""Fuzz ``nereus message schedule`` the way a hostile or careless caller would: generated
ids, times, durations, headers and batch lines. Whatever comes in, the command exits with
a documented status (never 70: that is a bug), prints exactly one JSON document under
``--json``, never a traceback, and the home still lists, digests and serves its status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.cli.engine_homes import init_home
from tests.conftest import CliResult, run_nereus
from tests.daemon import running_engine

DOCUMENTED = {0, 1, 2, 3, 4, 5, 6}

# what a shell can put in argv: any text but NUL (and no lone surrogates)
_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
_argv_text = st.text(st.characters(exclude_categories=_SURROGATES, exclude_characters="\x00"),
                     max_size=40)
_edgy_text = st.one_of(
    _argv_text,
    st.sampled_from(["", " ", "\x1b[2J", "\u202e", "x" * 300, "[bold]b[/bold]", "-", "--json",
                     "--home=/tmp/elsewhere", "é" * 129, "\t", "\n"]),
)
_times = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(["2026-11-29T20:00:00Z", "2026-11-29T20:00:00", "9999-12-31T23:59:59.999Z",
                     "10000-01-01T00:00:00Z", "1e400", "NaN", "0", "253402300800000",
                     "2026-02-30T00:00:00Z", "+inf"]),
    _argv_text,
)
_durations = st.one_of(
    st.sampled_from(["0s", "1ms", "30s", "5m", "2h", "1d", "1h30m", "99999999999999999d", "-5s",
                     "1.5s", "s", "5", "1y", ""]),
    st.integers(min_value=0, max_value=10**25).map(lambda n: f"{n}ms"),
    _argv_text,
)
_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=20)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                              max_size=3),
    max_leaves=8,
)
_batch_line = st.one_of(
    st.fixed_dictionaries({"lane": st.sampled_from(["local", "nope", "", "bad lane"])},
                          optional={"id": _json_values | _edgy_text,
                                    "deliver_at": _json_values | _times,
                                    "delay": _json_values | _durations,
                                    "expire_at": _json_values | _times,
                                    "key": _json_values | _edgy_text,
                                    "headers": _json_values | st.dictionaries(
                                        _edgy_text, _edgy_text, max_size=3),
                                    "payload": _json_values | _edgy_text}).map(json.dumps),
    st.sampled_from(['{"lane": "local", "delay": "1m", "key": "\\ud800"}', "[" * 5000,
                     '{"lane": "local"', "null", "", "   ", '{"lane": "local", "delay": "1m"}']),
    st.text(max_size=30),
)


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_home(tmp_path_factory.mktemp("fuzz") / "home")


def _holds_up(result: CliResult) -> None:
    assert result.code in DOCUMENTED, (result.code, result.stdout, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    json.loads(result.stdout)  # exactly one document (trailing data would raise)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(message_id=st.none() | _edgy_text, deliver_at=st.none() | _times,
       delay=st.none() | _durations, expire_at=st.none() | _times,
       headers=st.lists(_edgy_text, max_size=3), key=st.none() | _edgy_text)
# past 9999-12-31 but under 2^63: once accepted, and then every listing broke
@example(message_id="far-future", deliver_at="253402300800000", delay=None, expire_at=None,
         headers=[], key=None)
@example(message_id="very-far", deliver_at="99999999999999999", delay=None, expire_at=None,
         headers=[], key=None)
def test_schedule_flags_never_break_the_cli(fuzz_home: Path, message_id: str | None,
                                            deliver_at: str | None, delay: str | None,
                                            expire_at: str | None, headers: list[str],
                                            key: str | None) -> None:
    """Generated flag values: a documented exit status, one JSON document, no traceback."""
    args = ["--json", "message", "schedule", "--lane", "local", "--payload", "p"]
    for flag, value in (("--id", message_id), ("--deliver-at", deliver_at), ("--delay", delay),
                        ("--expire-at", expire_at), ("--key", key)):
        if value is not None:
            args += [f"{flag}={value}"]
    for header in headers:
        args += [f"--header={header}"]
    _holds_up(run_nereus(*args, home=fuzz_home, timeout=60))


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(_batch_line, min_size=1, max_size=6))
def test_batch_lines_never_break_the_cli(fuzz_home: Path, tmp_path_factory: pytest.TempPathFactory,
                                         lines: list[str]) -> None:
    """Generated batch lines: a documented exit status, one JSON document, no traceback."""
    batch = tmp_path_factory.mktemp("batch") / "batch.jsonl"
    batch.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    _holds_up(run_nereus("--json", "message", "schedule", "--batch", str(batch),
                         home=fuzz_home, timeout=60))


def test_after_the_fuzz_the_home_lists_digests_and_serves(fuzz_home: Path) -> None:
    """Runs after the fuzz tests of this module (file order): everything they queued is
    applied by a real engine, and every read path still works."""
    with running_engine(fuzz_home):
        status = run_nereus("--json", "engine", "status", home=fuzz_home)
        assert status.code == 0, status.stdout + status.stderr
        listed = run_nereus("--json", "message", "list", "--limit", "1000", home=fuzz_home)
        assert listed.code == 0, listed.stderr
        human = run_nereus("message", "list", "--limit", "1000", home=fuzz_home)
        assert human.code == 0 and "Traceback" not in human.stderr
        assert "\x1b" not in human.stdout
        for shard in ("default/0", "default/1"):
            log = run_nereus("shard", "log", shard, home=fuzz_home)
            assert log.code == 0 and "\x1b" not in log.stdout
    for shard in ("default/0", "default/1"):
        digest = run_nereus("--json", "shard", "digest", shard, home=fuzz_home)
        assert digest.code == 0, digest.stderr
