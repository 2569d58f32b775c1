"""Structured engine logs: JSON lines to ``<home>/log/engine.log``, console in the foreground.

Built on structlog's stdlib integration: engine events go through a structlog logger over
the stdlib logger ``nereus.engine.events`` (levels below the configured one are no-ops),
and the root logger's handlers render every record with one ``ProcessorFormatter`` — an
engine event as ``{...fields, "event", "level", "timestamp"}``, a library's record
(librdkafka, boto3, urllib3, ``warnings``) as the same kind of line with its ``logger`` and
one ``exception`` string; libraries stay at WARNING, so nothing they log tears a line. The
file is a ``WatchedFileHandler``: after logrotate renames it (no ``copytruncate`` needed)
the next write reopens it, and ``EngineLogs.reopen`` (SIGHUP) does so at once; the umask
keeps a recreated file 0600.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger, Processor

EVENTS_LOGGER: Final = "nereus.engine.events"
LOG_FILE: Final = "engine.log"
LIBRARY_LEVEL: Final = logging.WARNING  # the root level: what libraries may write
EVENT_LEVEL: Final = logging.INFO


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineLogs:
    """The engine's configured logs: its event logger and the handlers that own the files."""

    logger: FilteringBoundLogger  # ``logger.<level>(event, **fields)``
    path: Path  # ``<home>/log/engine.log``
    file_handler: logging.handlers.WatchedFileHandler
    handlers: tuple[logging.Handler, ...]  # everything ``configure`` put on the root logger

    def reopen(self) -> bool:
        """Reopen ``engine.log`` now if its path no longer names the open file (moved or
        deleted): the new file exists before the next event, as ``logrotate`` expects.
        True if it did; False if the open file is still ``engine.log``."""
        self.file_handler.acquire()  # not in the middle of another thread's write
        try:
            before = self.file_handler.stream
            self.file_handler.reopenIfNeeded()
            return self.file_handler.stream is not before
        finally:
            self.file_handler.release()

    def close(self) -> None:
        """Take the handlers off the root logger and close the files (end of the daemon)."""
        root = logging.getLogger()
        for handler in self.handlers:
            root.removeHandler(handler)
            handler.close()
        logging.captureWarnings(False)


def configure(log_dir: Path, *, foreground: bool, name: str = LOG_FILE,
              level: str = "info") -> EngineLogs:
    """Configure structlog and stdlib logging for the engine process; see the module doc.
    ``name``: the log file (a worker process of ``engine start --workers N`` has its own);
    ``level``: the least level of the engine's own events (``[engine] log_level``)."""
    import structlog
    from structlog.stdlib import ProcessorFormatter

    log_dir.mkdir(parents=True, exist_ok=True)
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    foreign_pre_chain: list[Processor] = [
        structlog.stdlib.add_logger_name, structlog.processors.add_log_level, timestamper]
    path = log_dir / name
    file_handler = logging.handlers.WatchedFileHandler(path, encoding="utf-8")
    file_handler.setFormatter(ProcessorFormatter(
        processors=[ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    structlog.processors.JSONRenderer()],
        foreign_pre_chain=foreign_pre_chain))
    handlers: list[logging.Handler] = [file_handler]
    if foreground:
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(ProcessorFormatter(
            processors=[ProcessorFormatter.remove_processors_meta,
                        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())],
            foreign_pre_chain=foreign_pre_chain))
        handlers.append(console)

    root = logging.getLogger()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(LIBRARY_LEVEL)
    event_level = logging.getLevelName(level.upper())
    if not isinstance(event_level, int):
        event_level = EVENT_LEVEL
    logging.getLogger(EVENTS_LOGGER).setLevel(event_level)
    logging.captureWarnings(True)  # ``warnings.warn`` from libraries: a WARNING record

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            timestamper,
            ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(event_level),
        cache_logger_on_first_use=True,
    )
    logger: FilteringBoundLogger = structlog.get_logger(EVENTS_LOGGER)
    return EngineLogs(logger=logger, path=path, file_handler=file_handler,
                      handlers=tuple(handlers))
