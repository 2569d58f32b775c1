"""How often a busy daemon does not act on a SIGTERM sent to its process.

Usage::

    .venv/bin/python bench/sigterm.py [--trials N] [--baseline DIR] [--json] [--keep]

Each trial starts ``python -m nereus.engine.hosting.daemon --workers 1`` on a fresh home (a file
log of two shards, lane ``local``), waits for ``admin_socket_ready``, and has three client
threads send ``GET /v1/status`` over the admin socket in a loop: each request is a new
thread in the daemon, and a thread being made or ending changes its signal mask, which
can take a signal the kernel meant for the main thread. After 0.5 s the process gets one
SIGTERM; the trial counts as *not acted on* when the daemon has not exited 5 s later (it
is then SIGKILLed). Reported per tree: trials, how many were not acted on, and the
seconds from the SIGTERM to the exit of those that were (p50, max).

``--baseline DIR`` runs the same trials, interleaved, against the ``nereus`` package of
``DIR`` (a checkout of an older commit: ``git worktree add /tmp/old 1492a58``) and prints
both, with the directory each tree's package was imported from. Before the main thread
waited for its requests in slices, 13 of 80 SIGTERMs were not acted on this way (1492a58;
see CHANGELOG.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec

from scratch import scratch_dir

REPO = Path(__file__).resolve().parent.parent
GRACE_S = 5.0  # a daemon still running this long after its SIGTERM did not act on it
LOAD_S = 0.5  # the clients' requests run this long before the SIGTERM
READY_S = 30.0


class Figures(msgspec.Struct, frozen=True):
    tree: str  # "this tree" or the baseline's directory
    package: str  # where the daemons' nereus package was imported from
    trials: int
    not_acted_on: int
    exit_p50_s: float | None
    exit_max_s: float | None


def _request_loop(path: Path, stop: threading.Event) -> None:
    """``GET /v1/status`` over and over (``AdminClient`` opens a connection for each)."""
    from nereus.adapters.admin.admin_client import AdminClient
    from nereus.errors import NereusError

    client = AdminClient(path, timeout=2)
    while not stop.is_set():
        try:
            client.get("/v1/status")
        except NereusError:  # not listening (yet, or any more), or stopping
            time.sleep(0.001)


def trial(home: Path, source: Path) -> float | None:
    """One daemon, busy, sent SIGTERM: seconds until it exited, None if not within
    ``GRACE_S``."""
    # ``-m`` and ``-c`` put the working directory first on sys.path: it must not be a
    # checkout, or its package would run instead of ``source``'s
    env, cwd = dict(os.environ, PYTHONPATH=str(source)), home.parent
    subprocess.run([sys.executable, "-c", "from nereus.cli.entry import main; main()",
                    "--home", str(home), "init", "--partitions", "2"],
                   env=env, cwd=cwd, check=True, capture_output=True)
    proc = subprocess.Popen([sys.executable, "-m", "nereus.engine.hosting.daemon",
                             "--home", str(home), "--workers", "1"], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    log = home / "log" / "engine.log"
    deadline = time.monotonic() + READY_S
    while not (log.exists() and "admin_socket_ready" in log.read_text()):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"the daemon on {home} did not start")
        time.sleep(0.02)
    stop = threading.Event()
    clients = [threading.Thread(target=_request_loop, args=(home / "run" / "admin.sock", stop))
               for _ in range(3)]
    for client in clients:
        client.start()
    try:
        time.sleep(LOAD_S)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=GRACE_S)
            return time.monotonic() - sent
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None
    finally:
        stop.set()
        for client in clients:
            client.join()


def package_of(source: Path, cwd: Path) -> str:
    """The directory ``nereus`` is imported from with ``source`` first on the path."""
    found = subprocess.run([sys.executable, "-c", "import nereus; print(nereus.__path__[0])"],
                           env=dict(os.environ, PYTHONPATH=str(source)), cwd=cwd,
                           check=True, capture_output=True, text=True)
    return found.stdout.strip()


def figures(tree: str, package: str, exits: list[float | None]) -> Figures:
    acted = sorted(e for e in exits if e is not None)
    return Figures(tree=tree, package=package, trials=len(exits),
                   not_acted_on=len(exits) - len(acted),
                   exit_p50_s=round(statistics.median(acted), 3) if acted else None,
                   exit_max_s=round(acted[-1], 3) if acted else None)


def render(results: list[Figures]) -> str:
    out = ["Nereus Delay: one SIGTERM to a daemon whose admin socket is busy",
           f"  {'tree':<24}  {'trials':>6}  {'not acted on':>12}  {'exit p50':>8}  "
           f"{'exit max':>8}  package"]
    for f in results:
        p50 = "-" if f.exit_p50_s is None else f"{f.exit_p50_s:.2f} s"
        top = "-" if f.exit_max_s is None else f"{f.exit_max_s:.2f} s"
        out.append(f"  {f.tree:<24}  {f.trials:>6}  {f.not_acted_on:>12}  {p50:>8}  {top:>8}"
                   f"  {f.package}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout whose nereus package runs the same trials")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    trees = [("this tree", REPO)]
    if args.baseline is not None:
        if not (args.baseline / "nereus" / "engine" / "daemon.py").exists():
            parser.error(f"--baseline {args.baseline}: no nereus/engine/hosting/daemon.py there")
        trees.append((str(args.baseline), args.baseline.resolve()))
    exits: dict[str, list[float | None]] = {name: [] for name, _ in trees}
    with scratch_dir("nereus-sigterm-", None, keep=args.keep) as root:
        packages = {name: package_of(source, root) for name, source in trees}
        for number in range(args.trials):
            for index, (name, source) in enumerate(trees):
                exits[name].append(trial(root / f"t{number}-{index}", source))
            if not args.json:
                print(f"\r  trial {number + 1}/{args.trials}", end="", file=sys.stderr,
                      flush=True)
    if not args.json:
        print(file=sys.stderr)
    results = [figures(name, packages[name], found) for name, found in exits.items()]
    print(json.dumps([msgspec.to_builtins(f) for f in results], indent=2) if args.json
          else render(results))


if __name__ == "__main__":
    main()
