"""The module the ``dramatiq`` CLI loads: ``dramatiq bot.worker_main``.

Dramatiq's CLI imports a module to find the broker and actors, so this is the one
module that configures at import time (ARCHITECTURE.md accepts it for the broker).
"""

from __future__ import annotations

from .logs import setup_logging
from .queue import setup
from .settings import Settings

setup_logging()  # ``warroom worker`` runs Dramatiq with --skip-logging: lines carry the session
broker, actors, holder = setup(Settings())
