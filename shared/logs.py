"""structlog set-up for every daemon: JSON in the cluster, a console renderer locally."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog


def configure(fmt: str, *, level: int = logging.INFO, **bound: Any) -> None:
    """Configure structlog once at daemon start; ``bound`` is added to every line."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.bind_contextvars(**bound)
