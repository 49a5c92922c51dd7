"""A worker process's stop signal: the first one starts a graceful stop, repeats are ignored.

Dramatiq's worker process stops gracefully on its first SIGTERM (its threads finish
their running messages, at most ``--worker-shutdown-timeout``) and calls
``sys.exit`` on the second. A second SIGTERM is common: systemd's default
``KillMode=control-group`` signals every process of the group, and the Dramatiq
parent forwards its own SIGTERM to the workers as well. ``sys.exit`` then unwinds
the main thread in the middle of the graceful stop while the consumer and worker
threads go on: the process stays half-alive, takes other sessions' messages and
fails them as the interpreter shuts its executors down (issue #19, item 14).

``keep_first_stop_signal`` wraps Dramatiq's handler so that only the first SIGTERM
(or SIGHUP) reaches it; later ones are logged. Dramatiq's worker process notices its
stop flag only once a second, and its threads take messages until then: the wrapper
also calls ``on_first`` at once, so the process takes no new step from the signal on.
The stop stays bounded by the shutdown timeout; SIGKILL remains the way to end a
worker at once. ``die_with_parent`` makes a worker process get that SIGTERM when its
Dramatiq parent is killed.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["STOP_SIGNALS", "die_with_parent", "keep_first_stop_signal"]

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def keep_first_stop_signal(on_first: Callable[[], None] | None = None) -> bool:
    """In a Dramatiq worker process's main thread: pass on only the first stop signal.

    ``on_first`` runs (in the signal handler, so it must be quick and thread-safe)
    before Dramatiq's handler sees the first signal.

    Returns False (and changes nothing) outside the main thread or when no Python
    handler is installed for SIGTERM (not under Dramatiq's CLI).
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    installed = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    if not callable(installed[signal.SIGTERM]):
        return False
    stopping = threading.Event()

    def once(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            log.warning(
                "%s again: already stopping; running steps finish first (SIGKILL ends now)",
                signal.Signals(signum).name,
            )
            return
        stopping.set()
        if on_first is not None:
            on_first()
        first = installed.get(signal.Signals(signum))
        if callable(first):
            first(signum, frame)

    for sig, handler in installed.items():
        if callable(handler):
            signal.signal(sig, once)
    return True


def die_with_parent() -> None:
    """Ask Linux for SIGTERM when this process's parent dies, even by SIGKILL (prctl(2),
    ``PR_SET_PDEATHSIG``): a worker process then stops gracefully instead of polling
    Redis under init. Usable as a ``preexec_fn``, or at a worker process's start.

    Does nothing on other systems. Errors are ignored: the process then outlives a
    parent that is killed, as it would without this.
    """
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
