"""Running a program with its stdout on a pseudo-terminal of a given size, as an operator's
terminal is: what it writes there (newlines as the terminal driver sends them back, CR LF,
read as LF), its stderr through a pipe, and its exit status."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
from collections.abc import Mapping, Sequence


def on_terminal(argv: Sequence[str], env: Mapping[str, str], *, columns: int,
                rows: int = 40, timeout: float = 60) -> tuple[int, str, str]:
    """``argv`` run with stdout on a new terminal ``columns`` wide (stdin from /dev/null,
    so only stdout is a terminal): its exit status, what it printed there and its stderr."""
    controller, terminal = os.openpty()
    try:
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=terminal,
                                stderr=subprocess.PIPE, env=dict(env))
        os.close(terminal)
        terminal = -1
        chunks: list[bytes] = []
        while True:
            try:
                data = os.read(controller, 65536)
            except OSError:  # every writer closed the terminal (EIO)
                break
            if not data:
                break
            chunks.append(data)
        _, err = proc.communicate(timeout=timeout)
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    out = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    return proc.returncode, out, err.decode(errors="replace")
