"""``warroom worker``: becomes the ``dramatiq`` parent process over ``bot.durable.worker_main``.

``exec_worker`` replaces the ``warroom`` process with Dramatiq's CLI (``os.execvp``,
same PID), so whatever started ``warroom worker`` — a shell, tini, systemd — signals
the Dramatiq parent directly. The CLI runs under ``bot.durable.launcher``, which imports
the worker code once before Dramatiq forks its worker processes (a new group is ready
sooner in a deploy). SIGTERM to that parent lets every worker process
finish its running step and exit (``--worker-shutdown-timeout``: one step's time
limit), and so does a SIGTERM to the whole process group (systemd's default; see
``bot.durable.shutdown``; docs/architecture.md §5). The workers log through ``setup_logging``
(``--skip-logging`` keeps Dramatiq's own format out).

With ``WARROOM_METRICS_PORT`` set, the worker processes write their metrics to a
fresh ``PROMETHEUS_MULTIPROC_DIR`` and Dramatiq forks ``serve_worker_metrics`` to
serve their sum on that port.
"""

from __future__ import annotations

import os
import sys
import tempfile

from bot.durable.actors import STEP_TIME_LIMIT_MS, WORKER_TIMEOUT_MS
from bot.metrics import MULTIPROC_DIR_VARIABLE
from bot.settings import Settings

__all__ = ["dramatiq_argv", "exec_worker"]

WORKER_MODULE = "bot.durable.worker_main"
LAUNCHER = "bot.durable.launcher"
METRICS_FORK = "bot.metrics:serve_worker_metrics"


def dramatiq_argv(
    *, processes: int, threads: int, with_metrics: bool, python: str = sys.executable
) -> list[str]:
    """The Dramatiq command line (``python -m bot.durable.launcher …``: Dramatiq's CLI with
    the worker code imported once before the fork) for ``warroom worker``.

    >>> dramatiq_argv(processes=2, threads=8, with_metrics=False, python="py")[3:7]
    ['--processes', '2', '--threads', '8']
    """
    argv = [python, "-m", LAUNCHER, "--processes", str(processes), "--threads", str(threads)]
    argv += ["--worker-shutdown-timeout", str(STEP_TIME_LIMIT_MS), "--skip-logging"]
    if with_metrics:
        argv += ["--fork-function", METRICS_FORK]
    return [*argv, WORKER_MODULE]


def exec_worker(settings: Settings, *, processes: int, threads: int) -> None:
    """Replace this process with the Dramatiq parent (same PID, same environment, plus
    a metrics directory when ``WARROOM_METRICS_PORT`` is set). Never returns.

    Raises:
        OSError: the interpreter could not be executed.
    """
    with_metrics = settings.metrics_port is not None
    if with_metrics:
        os.environ[MULTIPROC_DIR_VARIABLE] = tempfile.mkdtemp(prefix="warroom-metrics-")
    argv = dramatiq_argv(processes=processes, threads=threads, with_metrics=with_metrics)
    os.environ.setdefault("dramatiq_worker_timeout", str(WORKER_TIMEOUT_MS))
    # a process takes no more messages than it has threads, so a step never waits behind a
    # busy process's long Bash call while another process is free (parallel subagents)
    os.environ.setdefault("dramatiq_queue_prefetch", str(threads))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(argv[0], argv)
