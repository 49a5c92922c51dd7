"""The module the ``dramatiq`` CLI loads: ``dramatiq bot.durable.worker_main``.

Dramatiq's CLI imports a module to find the broker and actors, so this is the one
module that configures at import time (docs/architecture.md accepts it for the broker).
"""

from __future__ import annotations

from bot.durable.actors import setup
from bot.durable.shutdown import die_with_parent, keep_first_stop_signal
from bot.logs import setup_logging
from bot.settings import Settings

setup_logging()  # ``warroom worker`` runs Dramatiq with --skip-logging: lines carry the session
broker, actors, holder = setup(Settings(), host=True)  # a worker host: its own queue too
# a group SIGTERM must not turn a graceful stop into sys.exit, and from the first one on
# the process takes no new step (Dramatiq's own stop starts up to a second later)
keep_first_stop_signal(on_first=holder.drain)
die_with_parent()  # a killed Dramatiq parent leaves no worker process behind
