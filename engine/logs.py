"""Structured engine logs: JSON lines to ``<home>/log/engine.log``, console in the foreground."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any


def configure(log_dir: Path, *, foreground: bool) -> Any:
    """Configure structlog; returns the engine's bound logger."""
    import structlog

    log_dir.mkdir(parents=True, exist_ok=True)
    handle = open(log_dir / "engine.log", "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    file_logger = structlog.PrintLogger(handle)
    console = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()) if foreground else None
    json_renderer = structlog.processors.JSONRenderer()

    def tee(logger: Any, method: str, event: Any) -> str:
        line = json_renderer(logger, method, dict(event))
        file_logger.msg(line if isinstance(line, str) else line.decode())
        if console is not None:
            print(console(logger, method, dict(event)), file=sys.stderr, flush=True)
        raise structlog.DropEvent

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            tee,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )
    return structlog.get_logger("nereus.engine")
