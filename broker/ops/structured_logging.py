"""structlog set-up: JSON events one per line by default, a console renderer for terminals.

Events of INFO and above are kept in memory per broker (`recent_logs`, served at
``/v1/logs``) even when ``level`` writes fewer of them."""

from __future__ import annotations

import logging
import sys

import structlog
from structlog.typing import EventDict, WrappedLogger

from purgatory.broker.ops.recent_logs import RECENT_LOGS


def configure_logging(fmt: str = "json", level: str = "INFO") -> None:
    renderer: structlog.typing.Processor
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer()
    else:
        renderer = structlog.processors.JSONRenderer()
    written = getattr(logging, level)
    levels = {name.lower(): n for name, n in logging.getLevelNamesMapping().items()}

    def drop_unwritten(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
        if levels.get(event_dict["level"], logging.CRITICAL) < written:
            raise structlog.DropEvent
        return event_dict

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            RECENT_LOGS,
            drop_unwritten,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(min(written, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
