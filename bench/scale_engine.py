"""The daemon as ``bench/scale.py`` runs it: a home of its own, the engine started and
stopped as an operator would (``nereus.adapters.admin.engine_process``, the default worker
count), watched over its admin socket and through ``/proc``, and the installed ``nereus``
timed as an operator meets it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inprocess_engine import ShardLogs
from installed_cli import cli_environ
from nereus.adapters.admin.admin_client import AdminClient
from nereus.adapters.admin.engine_process import start_engine, stop_engine
from nereus.adapters.home.home_lock import socket_path
from nereus.config import Config, parse_config
from nereus.layout import HomeLayout
from process_tree import tree_cpu_s, tree_pids, tree_rss_mb

NEREUS = str(Path(sys.executable).with_name("nereus"))
ROUTE = "default"


def make_home(root: Path, prefix: str, *, partitions: int, lanes: dict[str, str]) -> Path:
    """A fresh home: one file-log route of ``partitions`` shards; each of ``lanes`` (name:
    extra TOML lines) writes to ``outbox/<name>.jsonl``."""
    home = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    text = f'[routes.{ROUTE}]\nlog = "file"\npartitions = {partitions}\n'
    for name, extra in lanes.items():
        text += (f'\n[lanes.{name}]\ndestination = "file"\npath = "outbox/{name}.jsonl"\n'
                 f"{extra}")
    layout = HomeLayout(home)
    layout.config.write_text(text)
    layout.outbox.mkdir()
    return home


def config_of(home: Path) -> Config:
    layout = HomeLayout(home)
    return parse_config(layout.config.read_text(), source=str(layout.config))


def wait_until(condition: Callable[[], bool], deadline_s: float, what: str,
               interval_s: float = 0.05) -> float:
    """Seconds until ``condition`` held; a SystemExit naming ``what`` at the deadline."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > deadline_s:
            raise SystemExit(f"scale: {what} not reached within {deadline_s:.0f} s")
        time.sleep(interval_s)
    return time.monotonic() - start


MEMORY_FAMILIES = ("nereus_store_", "nereus_resident_memory")


@dataclass
class Daemon:
    """A running engine on ``home``: its admin client and process ids."""

    home: Path
    pid: int
    admin: AdminClient

    @classmethod
    def start(cls, home: Path, timeout: float = 600) -> Daemon:
        started = start_engine(HomeLayout(home), timeout, lambda text: print(text, file=sys.stderr))
        daemon = cls(home, started.pid, AdminClient(socket_path(home), timeout=60))
        return daemon

    def stop(self) -> None:
        stop_engine(HomeLayout(self.home), 300)

    def shards(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.admin.get("/v1/shards")["shards"]
        return found

    def held_back_ms(self) -> int:
        """How far the engine's Trusted UTC is held behind the wall clock (a step forwards
        while it ran: every decision that much later)."""
        trusted: dict[str, Any] = self.admin.get("/v1/status")["trusted_time"]
        return int(trusted.get("held_back_ms") or 0)

    def all_active(self) -> bool:
        return all(s["state"] == "ACTIVE" for s in self.shards())

    def states(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for lane in self.admin.get("/v1/lanes")["lanes"]:
            for state, n in lane["messages_by_state"].items():
                if n:
                    counts[state] = counts.get(state, 0) + n
        return counts

    def pids(self) -> list[int]:
        return tree_pids(self.pid)

    def rss_mb(self) -> float:
        """Resident memory of the front door and its worker processes."""
        return tree_rss_mb(self.pid)

    def cpu_s(self) -> float:
        return tree_cpu_s(self.pid)

    def memory_mb(self) -> dict[str, float]:
        """Where the engine's memory is (its ``nereus_store_*`` and resident gauges, summed
        over its processes), in MiB as the RSS figures, by family name without ``nereus_``
        and ``_bytes``."""
        from prometheus_client.parser import text_string_to_metric_families

        text = self.admin.get("/v1/metrics")["exposition"]
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            if family.name.endswith("_bytes") and family.name.startswith(MEMORY_FAMILIES):
                name = family.name.removeprefix("nereus_").removesuffix("_bytes")
                out[name] = round(sum(s.value for s in family.samples) / (1 << 20), 1)
        return out


def open_logs(home: Path) -> ShardLogs:
    return ShardLogs(home, config_of(home))


def nereus(home: Path, *args: str, timeout: float = 900) -> tuple[float, str]:
    """Run the installed ``nereus`` on ``home``; (wall seconds, stdout). Exits on failure."""
    environ = cli_environ()
    started = time.monotonic()
    done = subprocess.run([NEREUS, "--home", str(home), *args], capture_output=True, text=True,
                          env=environ, timeout=timeout, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"scale: nereus {' '.join(args)} exited {done.returncode}:\n"
                         f"{done.stdout}\n{done.stderr}")
    return wall, done.stdout


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
