"""``warroom worker``: becomes the ``dramatiq`` parent process over ``bot.durable.worker_main``.

``run_worker`` runs Dramatiq's CLI in the ``warroom`` process itself (same PID, through
``bot.durable.launcher``), so whatever started ``warroom worker`` — a shell, tini, systemd
— signals the Dramatiq parent directly, and the worker code the command already imported
(its configuration checks load the harness) is what Dramatiq's forked worker processes
start with: a new worker group pays for one import, not one per process plus the command's
own (issue #32.2: a deploy's sessions wait for the new group). SIGTERM to that parent lets
every worker process finish its running step and exit (``--worker-shutdown-timeout``: one
step's time limit), and so does a SIGTERM to the whole process group (systemd's default;
see ``bot.durable.shutdown``; docs/architecture.md §5). The workers log through
``setup_logging`` (``--skip-logging`` keeps Dramatiq's own format out).

Dramatiq and ``prometheus_client`` read their environment once, at import, so
``prepare_worker_env`` must run before anything imports them (before the configuration
checks): it sets Dramatiq's poll and prefetch and, with ``WARROOM_METRICS_PORT`` set, a
fresh ``PROMETHEUS_MULTIPROC_DIR`` where the worker processes write their metrics
(Dramatiq forks ``serve_worker_metrics`` to serve their sum on that port). This module
imports neither.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile

from bot.durable.worker_limits import STEP_TIME_LIMIT_MS, WORKER_TIMEOUT_MS
from bot.settings import Settings

__all__ = ["dramatiq_argv", "prepare_worker_env", "run_worker"]

log = logging.getLogger(__name__)

WORKER_MODULE = "bot.durable.worker_main"
LAUNCHER = "bot.durable.launcher"
METRICS_FORK = "bot.metrics:serve_worker_metrics"
MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
"""``prometheus_client``'s multiprocess directory (``bot.metrics`` names it too; not
imported from there, which would import ``prometheus_client`` before it is set)."""


def dramatiq_argv(
    *, processes: int, threads: int, with_metrics: bool, python: str = sys.executable
) -> list[str]:
    """The Dramatiq command line (``python -m bot.durable.launcher …``: Dramatiq's CLI with
    the worker code imported once before the fork), as another process starts it.

    >>> dramatiq_argv(processes=2, threads=8, with_metrics=False, python="py")[3:7]
    ['--processes', '2', '--threads', '8']
    """
    argv = [python, "-m", LAUNCHER, "--processes", str(processes), "--threads", str(threads)]
    argv += ["--worker-shutdown-timeout", str(STEP_TIME_LIMIT_MS), "--skip-logging"]
    if with_metrics:
        argv += ["--fork-function", METRICS_FORK]
    return [*argv, WORKER_MODULE]


def prepare_worker_env(settings: Settings, *, threads: int) -> None:
    """Set what Dramatiq and ``prometheus_client`` read at import in this process's
    environment (inherited by the worker processes): Dramatiq's idle poll and prefetch
    (unless set), and a fresh metrics directory when ``WARROOM_METRICS_PORT`` is set.

    A module already imported (in a test's process) keeps what it read: logged.

    Raises:
        OSError: the metrics directory could not be made.
    """
    early = [name for name in ("dramatiq", "prometheus_client") if name in sys.modules]
    if early:
        log.warning("%s imported before the worker's environment was set", ", ".join(early))
    if settings.metrics_port is not None:
        os.environ[MULTIPROC_DIR_VARIABLE] = tempfile.mkdtemp(prefix="warroom-metrics-")
    os.environ.setdefault("dramatiq_worker_timeout", str(WORKER_TIMEOUT_MS))
    # a process takes no more messages than it has threads, so a step never waits behind a
    # busy process's long Bash call while another process is free (parallel subagents)
    os.environ.setdefault("dramatiq_queue_prefetch", str(threads))


def run_worker(settings: Settings, *, processes: int, threads: int) -> int:
    """Run the Dramatiq parent in this process (after ``prepare_worker_env``) until its
    worker processes stop; returns its exit code.

    Raises:
        ImportError: the worker code could not be imported.
    """
    from bot.durable.launcher import main

    with_metrics = settings.metrics_port is not None
    argv = dramatiq_argv(processes=processes, threads=threads, with_metrics=with_metrics)
    sys.stdout.flush()
    sys.stderr.flush()
    return main(argv[3:])
