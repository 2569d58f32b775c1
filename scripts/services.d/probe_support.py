"""What every readiness probe shares: addresses, logging to stderr, retrying to a deadline.

Addresses and credentials come from the same environment variables that ``scripts/services``
reads; a probe retries until one round trip succeeds, the deadline passes or the server's
process (``--pid``) has died.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

HOST = "127.0.0.1"


def env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def log(msg: str) -> None:
    print(f"probe: {msg}", file=sys.stderr, flush=True)


class ProcessDied(Exception):
    pass


def alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def retry(name: str, attempt: Callable[[float], str], timeout: float, pid: int | None) -> str:
    """Call ``attempt(budget_seconds)`` until it returns, the deadline passes or pid dies."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    tries = 0
    while True:
        if not alive(pid):
            raise ProcessDied(f"{name} server process {pid} exited")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"{name} not ready after {timeout:.0f}s ({tries} tries); last error: {last!r}"
            )
        tries += 1
        try:
            return attempt(min(remaining, 30.0))
        except Exception as exc:
            last = exc
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
