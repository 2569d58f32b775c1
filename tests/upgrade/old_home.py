"""A home written by a released build, as its operator would have used it.

``write_old_home`` drives the release's own ``nereus`` (and, for the one state no command
makes, the release's own ``tests/uncertain.py`` under the release's interpreter): every
client command (SCHEDULE with inline and large payloads, CANCEL, RESCHEDULE,
QUERY_BARRIER through ``--wait``), operator mutations (lane gate, lane config, shard
pause and resume), the engine's system records (activation, admissions, outcomes, claims,
checkpoint marks), messages PUBLISHED, CANCELLED, SCHEDULED and UNCERTAIN, ordered lanes,
and a checkpoint per shard with records after it. It returns what the release said about
that home, for the new build to be held to.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import NEREUS, run_nereus
from tests.daemon import kill_engine, process_gone
from tests.polling import wait_until
from tests.upgrade.release_build import ReleaseBuild

PARTITIONS = 2
# an ORDERED lane, a lane whose messages go 1 s after they end (SWEEP), and shard limits
# of its own (SHARD_LIMITS)
LANES = ('\n[lanes.ordered]\ndestination = "file"\npath = "outbox/ordered.jsonl"\n'
         'ordered = true\n\n[lanes.brief]\ndestination = "file"\npath = "outbox/brief.jsonl"\n'
         'retention = "1s"\ndedup_window = "1s"\n')
SHARD_LIMITS = "\n[shard]\nmax_headers = 100\n"
LARGE_BYTES = 70_000  # above [shard] max_inline_payload_bytes (65,536): the object store
DUE = [f"due-{n}" for n in range(6)] + ["ord-a-0", "ord-a-1", "big-due"]
PENDING = [f"later-{n}" for n in range(2, 10)] + ["ord-b-0", "big-later", "later-1",
                                                  "tail-0"]
CANCELLED = ["later-0"]
BROKEN = "ord-b-1"  # MESSAGE_BREAK: FAILED
EXPIRED = "exp-0"  # CLAIM_RESULT EXPIRED
UNCERTAIN = "uncertain-1"  # on default/0
RESOLVED = "uncertain-2"  # on default/1: ATTEMPT_RESOLVE --not-published, then published
SWEPT = "brief-0"  # published on the 1 s lane, then swept


REASON = ("--reason", "upgrade drill", "--yes")


@dataclass
class OldHome:
    """What the release said about the home it wrote, read with its engine stopped."""

    home: Path
    shards: list[str]
    checkpoints: dict[str, str]  # shard -> the checkpoint id the release took
    digests: dict[str, str] = field(default_factory=dict)  # shard -> its digest
    states: dict[str, str] = field(default_factory=dict)  # delayMessageId -> state


def cli(build: ReleaseBuild | None, home: Path, *args: str) -> Any:
    """One command of ``build`` (None: this checkout's) with ``--json``; must succeed."""
    executable = NEREUS if build is None else str(build.nereus)
    done = run_nereus("--json", *args, home=home, timeout=90, executable=executable,
                      env=None if build is None else build.environ())
    assert done.code == 0, f"nereus {' '.join(args)} -> {done.code}: {done.stdout}{done.stderr}"
    return json.loads(done.stdout) if done.stdout.strip() else None


def states(build: ReleaseBuild | None, home: Path) -> dict[str, str]:
    """Every message's state, as the running engine of ``build`` lists it."""
    listed = cli(build, home, "message", "list", "--limit", "1000")
    return {m["delay_message_id"]: m["state"] for m in listed["messages"]}


def _batch(path: Path) -> Path:
    lines: list[dict[str, object]] = [
        {"id": i, "lane": "local", "delay": "0s", "payload": f"p-{i}"} for i in DUE[:6]]
    lines += [{"id": f"later-{n}", "lane": "local", "delay": "1d", "payload": "x"}
              for n in range(10)]
    lines += [{"id": f"ord-a-{n}", "lane": "ordered", "key": "a", "delay": "0s",
               "payload": "o"} for n in range(2)]
    lines += [{"id": f"ord-b-{n}", "lane": "ordered", "key": "b", "delay": "1d",
               "payload": "o", "headers": {"h": "v"}} for n in range(2)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _commands(build: ReleaseBuild, home: Path, work: Path, shards: list[str]) -> None:
    """Every kind of command the release's CLI writes (module docstring)."""
    cli(build, home, "message", "schedule", "--batch", str(_batch(work / "batch.jsonl")))
    cli(build, home, "message", "cancel", "later-0", "--wait")
    cli(build, home, "message", "reschedule", "later-1", "--delay", "2d", "--wait")
    big = work / "big.bin"
    big.write_bytes(bytes(range(256)) * (LARGE_BYTES // 256 + 1))
    for ident, delay in (("big-due", "0s"), ("big-later", "1d")):
        cli(build, home, "message", "schedule", "--lane", "local", "--delay", delay,
            "--payload-file", str(big), "--id", ident, "--wait")
    cli(build, home, "lane", "set", "local", "--retry-max", "7", *REASON)
    cli(build, home, "shard", "pause", shards[1], *REASON)
    cli(build, home, "shard", "resume", shards[1], *REASON)
    cli(build, home, "message", "break", BROKEN, *REASON)
    cli(build, home, "message", "schedule", "--lane", "brief", "--delay", "0s",
        "--payload", "brief", "--id", SWEPT, "--wait")


def _expire(build: ReleaseBuild, home: Path) -> None:
    """A message whose expireAt is its deliverAt, already past when it is applied: no
    clock proves it open, so it expires (CLAIM_RESULT EXPIRED); lane gates come and go."""
    cli(build, home, "lane", "close", "ordered", *REASON)
    cli(build, home, "lane", "open", "ordered", *REASON)
    at = str(int(time.time() * 1000))
    cli(build, home, "message", "schedule", "--lane", "ordered", "--deliver-at", at,
        "--expire-at", at, "--payload", "e", "--id", EXPIRED, "--wait")
    wait_until("a message expired by the release", lambda: states(build, home).get(EXPIRED)
               == "EXPIRED", 30, seen=lambda: states(build, home).get(EXPIRED))


def _published(build: ReleaseBuild, home: Path, idents: list[str]) -> bool:
    now = states(build, home)
    return all(now.get(i) == "PUBLISHED" for i in idents)


def _make_uncertain(build: ReleaseBuild, home: Path) -> None:
    """The release's own helper leaves an attempt PUBLISHING under a dead owner, on each
    shard (``UNCERTAIN`` and ``RESOLVED`` are on different shards)."""
    code = ("import sys; from pathlib import Path; from tests.uncertain import "
            "make_unknown_attempt as make; home = Path(sys.argv[1]); "
            f"make(home, {UNCERTAIN!r}, 'ghost-1', partitions={PARTITIONS}); "
            f"make(home, {RESOLVED!r}, 'ghost-2', partitions={PARTITIONS})")
    subprocess.run([str(build.python), "-c", code, str(home)], cwd=build.tree, check=True,
                   timeout=60, env={**os.environ, **build.environ()})


def _init(build: ReleaseBuild, home: Path, kafka: str | None) -> str:
    """``nereus init`` with two partitions on the file log, or on Kafka at ``kafka`` (a
    route of its own, so a topic of its own); the route's name."""
    route = "default" if kafka is None else f"up{uuid.uuid4().hex[:10]}"
    log = () if kafka is None else ("--log", "kafka", "--route", route)
    cli(build, home, "init", "--partitions", str(PARTITIONS), *log)
    config = home / "nereus.toml"
    text = config.read_text().replace("\n[shard]\n", SHARD_LIMITS) + LANES
    if kafka is not None:
        text = re.sub(r'bootstrap = "[^"]*"', f'bootstrap = "{kafka}"', text)
    config.write_text(text)
    return route


def _uncertain(build: ReleaseBuild, home: Path) -> None:
    """Two attempts left UNKNOWN by a dead owner (file log): one stays UNCERTAIN, the
    other is resolved NOT_PUBLISHED by an operator and published again."""
    cli(build, home, "engine", "stop", "--timeout", "20")
    _make_uncertain(build, home)
    cli(build, home, "engine", "start", "--timeout", "30")
    wait_until("the dead owners' attempts UNCERTAIN under the release",
               lambda: {states(build, home).get(i) for i in (UNCERTAIN, RESOLVED)}
               == {"UNCERTAIN"}, 30, seen=lambda: states(build, home))
    cli(build, home, "attempt", "resolve", "ghost-2", "--not-published", "--unverified",
        "--evidence", "checked by hand", *REASON)
    wait_until("the resolved attempt's message published again by the release",
               lambda: _published(build, home, [RESOLVED]), 30,
               seen=lambda: states(build, home).get(RESOLVED))


def write_old_home(build: ReleaseBuild, home: Path, work: Path, *,
                   kafka: str | None = None) -> OldHome:
    """Write the home with ``build`` and stop its engine (module docstring); with
    ``kafka`` (a bootstrap address) its Shard Logs are on Kafka, and the dead owner's
    attempts (made by appending to a file log) are left out. Whatever happens, no engine
    of the release is left running (``stopped``)."""
    route = _init(build, home, kafka)
    shards = [f"{route}/{p}" for p in range(PARTITIONS)]
    with stopped(build, home):
        cli(build, home, "engine", "start", "--timeout", "30")
        _expire(build, home)
        _commands(build, home, work, shards)
        wait_until("the due messages published by the release",
                   lambda: _published(build, home, DUE), 60, seen=lambda: states(build, home))
        wait_until("the 1 s lane's message swept by the release",
                   lambda: SWEPT not in states(build, home), 30)
        checkpoints = {shard: cli(build, home, "checkpoint", "create", shard)["checkpoint_id"]
                       for shard in shards}
        cli(build, home, "message", "schedule", "--lane", "local", "--delay", "1d",
            "--payload", "after the checkpoint", "--id", "tail-0", "--wait")
        if kafka is None:
            _uncertain(build, home)
        old = OldHome(home, shards, checkpoints, states=states(build, home))
    old.digests = {shard: cli(build, home, "shard", "digest", shard)["digest"]
                   for shard in shards}
    return old


@contextmanager
def stopped(build: ReleaseBuild | None, home: Path) -> Iterator[None]:
    """The block, then ``build``'s engine on ``home`` stopped: ``engine stop``, and when
    that fails (the block failed with a broker away, say) SIGKILL of the home's daemon."""
    try:
        yield
    finally:
        executable = NEREUS if build is None else str(build.nereus)
        done = run_nereus("engine", "stop", "--timeout", "20", home=home, timeout=60,
                          executable=executable,
                          env=None if build is None else build.environ())
        if done.code != 0:
            pid = kill_engine(home)
            if pid is not None:
                wait_until(f"engine pid {pid} gone", lambda: process_gone(pid), 10)
