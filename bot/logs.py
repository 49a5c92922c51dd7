"""Logging: every line says which session, org and channel it is about.

``log_context`` sets the session's ids in a ``contextvars.ContextVar`` for the code
inside it (the step driver wraps each step in one); ``ContextFilter`` copies them
onto every record as ``session_id``, ``org_id`` and ``channel_id`` (``-`` when
unset), so the text format ends with ``session=… org=… channel=…``. Context
variables follow asyncio: a task started inside the block sees the ids, other
tasks and threads do not.

>>> with log_context(session_id="s1", org_id="T1", channel_id="C1"):
...     current_context()
LogContext(session_id='s1', org_id='T1', channel_id='C1')
>>> current_context()
LogContext(session_id='-', org_id='-', channel_id='-')
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TextIO

__all__ = [
    "LOG_FORMAT",
    "ContextFilter",
    "LogContext",
    "current_context",
    "log_context",
    "setup_logging",
]

UNSET = "-"
LOG_FORMAT = (
    "%(asctime)s %(levelname)s %(name)s: %(message)s "
    "session=%(session_id)s org=%(org_id)s channel=%(channel_id)s"
)


@dataclass(frozen=True)
class LogContext:
    """The ids a log line is about; ``-`` when not known."""

    session_id: str = UNSET
    org_id: str = UNSET
    channel_id: str = UNSET


NO_CONTEXT = LogContext()
_context: ContextVar[LogContext] = ContextVar("warroom_log_context", default=NO_CONTEXT)


def current_context() -> LogContext:
    """The ids set by the innermost ``log_context`` of this task or thread."""
    return _context.get()


@contextmanager
def log_context(
    *, session_id: str | None = None, org_id: str | None = None, channel_id: str | None = None
) -> Iterator[LogContext]:
    """Tag log lines inside the block; ids not given keep the enclosing block's value."""
    outer = _context.get()
    inner = LogContext(
        session_id=session_id or outer.session_id,
        org_id=org_id or outer.org_id,
        channel_id=channel_id or outer.channel_id,
    )
    token = _context.set(inner)
    try:
        yield inner
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    """Adds ``session_id``, ``org_id`` and ``channel_id`` to each record (never drops one).

    A record that already carries an id (passed with ``extra=``) keeps it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Copy the current ``LogContext`` onto ``record``; always True."""
        context = _context.get()
        for name in ("session_id", "org_id", "channel_id"):
            if not hasattr(record, name):
                setattr(record, name, getattr(context, name))
        return True


def setup_logging(level: str | int = "INFO", *, stream: TextIO | None = None) -> logging.Handler:
    """Send every logger's records to ``stream`` (default stderr) in ``LOG_FORMAT``.

    Replaces handlers an earlier call installed (idempotent); other handlers stay.

    Returns:
        The installed handler (its filter adds the context to every record).
    """
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler = _Handler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(ContextFilter())
    root.addHandler(handler)
    root.setLevel(level)
    return handler


class _Handler(logging.StreamHandler[TextIO]):
    """The handler ``setup_logging`` installs (a type of its own, so it can be replaced)."""
