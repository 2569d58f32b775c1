"""Running a program with its stdout on a pseudo-terminal of a given size, as an operator's
terminal is: what it writes there (newlines as the terminal driver sends them back, CR LF,
read as LF), its stderr through a pipe, and its exit status."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence


def on_terminal(argv: Sequence[str], env: Mapping[str, str], *, columns: int,
                rows: int = 40, timeout: float = 60) -> tuple[int, str, str]:
    """``argv`` run with stdout on a new terminal ``columns`` wide (stdin from /dev/null,
    so only stdout is a terminal): its exit status, what it printed there and its stderr.
    Killed, and TimeoutError raised, if its terminal is still open after ``timeout``."""
    controller, terminal = os.openpty()
    try:
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=terminal,
                                stderr=subprocess.PIPE, env=dict(env))
        os.close(terminal)
        terminal = -1
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([controller], [], [], remaining)[0]:
                proc.kill()
                proc.wait()
                raise TimeoutError(f"{argv[0]} still had its terminal open after {timeout} s")
            try:
                data = os.read(controller, 65536)
            except OSError:  # every writer closed the terminal (EIO)
                break
            if not data:
                break
            chunks.append(data)
        _, err = proc.communicate(timeout=max(deadline - time.monotonic(), 1))
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    out = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    return proc.returncode, out, err.decode(errors="replace")
