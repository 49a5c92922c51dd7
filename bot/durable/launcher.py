"""The Dramatiq parent of ``warroom worker``: imports the workers' code once, then forks them.

Dramatiq's CLI (``python -m dramatiq``) forks its worker processes before any of them
imports the worker module, so each process imports the bot, the harness and their
libraries (the Anthropic and MCP SDKs, SQLAlchemy, …) on its own: about 3 CPU-seconds
each. In a deploy the new worker group boots while the old one finishes its steps and
every session waits for it (issue #32.2): 3 worker processes took 8.4–10.9 s from start
to "ready for action" on the shared 2-core machine, 25 s during a deploy.

``python -m bot.durable.launcher [Dramatiq's options] bot.durable.worker_main`` imports
``PRELOADED`` in the parent, then runs Dramatiq's own CLI in the same process. Dramatiq
starts its processes by ``fork`` (its default on Linux before Python 3.14), so each
worker process starts with those modules loaded and only runs ``worker_main``'s body
(settings, broker, actors): the same group was ready in 3.0–5.4 s. The preloaded modules
open nothing at import (no thread, socket or file: docs/architecture.md keeps
construction out of import time), so forking after them is safe. With another start
method (``--use-spawn``) the preload only costs the parent its import.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

__all__ = ["PRELOADED", "main"]

PRELOADED = ("bot.durable.actors", "bot.durable.wiring")
"""The modules ``bot.durable.worker_main`` imports that cost the time (the whole worker)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Import ``PRELOADED``, then run Dramatiq's CLI with ``argv`` (default: this process's
    arguments); returns its exit code. Blocks until the worker group stops.

    Raises:
        SystemExit: the arguments are not Dramatiq's (its parser's usage message).
        ImportError: a preloaded module could not be imported.
    """
    for name in PRELOADED:
        importlib.import_module(name)
    from dramatiq.cli import main as dramatiq_main
    from dramatiq.cli import make_argument_parser

    parser = make_argument_parser()  # type: ignore[no-untyped-call]
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    return int(dramatiq_main(args) or 0)  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    sys.exit(main())
