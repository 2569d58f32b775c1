"""What the CLI does with an exception nobody expected: a bug.

The operator gets one line on stderr (and, under ``--json``, the error document) and
exit 70; the traceback goes to a crash file under the home's log directory (or the
system's temporary directory when the home has none), whose path the line names, so a
bug report carries it without a 125 KB traceback on the terminal.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path

from nereus.layout import HomeLayout


def write_crash_file(exc: BaseException, home: Path, argv: list[str]) -> Path | None:
    """Write the traceback and the command line; the file's path, or None if none could be."""
    text = (f"nereus {' '.join(argv)}\n"
            f"at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, pid {os.getpid()}\n\n"
            + "".join(traceback.format_exception(exc)))
    name = f"crash-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.txt"
    directory = HomeLayout(home).logs
    for where in (directory, Path(tempfile.gettempdir())):
        if where is directory and not home.is_dir():
            continue
        try:
            where.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = where / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            return path
        except OSError:
            continue
    return None
