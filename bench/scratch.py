"""The temp directory a benchmark works in: removed afterwards, or kept and named."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch_dir(prefix: str, parent: Path | None, *, keep: bool) -> Iterator[Path]:
    """A new directory under ``parent`` (the system temp dir if None); on exit, failed or
    not, it is removed, or with ``keep`` left in place and its path printed to stderr."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield root
    finally:
        if keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
