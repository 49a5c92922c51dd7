"""Dramatiq settings of a worker that its launcher needs before Dramatiq is imported.

Dramatiq reads its environment settings (``dramatiq_worker_timeout``, …) once, at import;
``warroom worker`` sets them first, so this module imports nothing of Dramatiq's.
"""

from __future__ import annotations

WORKER_TIMEOUT_MS = 100
"""Dramatiq's idle poll cap (``dramatiq_worker_timeout``, default 1,000 ms): an idle
consumer backs off exponentially up to it between Redis fetches, so the wake-up of a
session's next step waited ~15 ms per step on average at the default; at 100 ms the
idle cost is ~10 fetches/s per worker process. Read by Dramatiq at import: the
launcher sets it in the worker's environment (see ``bot.cli.worker``)."""
STEP_TIME_LIMIT_MS = 11 * 60 * 1000  # one step: Bash may take 10 min (Claude Code's max)
