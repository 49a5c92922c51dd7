"""Stop signals of the interactive commands (``chat``, ``drill``), and children that die with
their parent.

``run_interruptible`` runs a coroutine like ``asyncio.run``, but SIGTERM, SIGINT and
SIGHUP (a closed terminal, a dropped SSH session) take one path: the first cancels the
coroutine, whose ``finally`` blocks and exit stacks clean up (worker threads and processes
stopped, sandboxes destroyed, temporary directories removed), then ``Interrupted`` is
raised; the command exits ``128 + signal`` (143 for SIGTERM, 130 for SIGINT, 129 for
SIGHUP), as a shell reports a process a signal ended. Jails run in sessions of their own
(``bwrap --new-session``) and never see the terminal's hangup: only this clean-up ends
them. A repeated signal during clean-up is logged, not acted on.

``die_with_parent`` is a ``preexec_fn`` for the child processes a command starts:
Linux's ``PR_SET_PDEATHSIG`` sends the child SIGTERM when its parent dies, even by
SIGKILL, so no worker is left polling Redis under init (prctl(2)).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

from bot.durable.shutdown import die_with_parent

__all__ = ["STOP_SIGNALS", "Interrupted", "die_with_parent", "run_interruptible"]

log = logging.getLogger(__name__)

T = TypeVar("T")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Interrupted(Exception):
    """A stop signal ended the command after its clean-up; ``exit_code`` is 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum
        self.exit_code = 128 + signum


def run_interruptible(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, where a stop signal cancels ``main`` (see the module doc).

    Raises:
        Interrupted: a stop signal came; ``main`` was cancelled and has cleaned up.
    """
    return asyncio.run(_guarded(main))


async def _guarded(main: Coroutine[Any, Any, T]) -> T:
    task, loop = asyncio.current_task(), asyncio.get_running_loop()
    assert task is not None
    received: list[int] = []

    def on_signal(signum: int) -> None:
        if received:
            log.warning("%s again: still cleaning up", signal.Signals(signum).name)
            return
        received.append(signum)
        task.cancel()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        result = await main
    except asyncio.CancelledError:
        if not received:
            raise
        task.uncancel()
        raise Interrupted(received[0]) from None
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    if received:  # the clean-up swallowed the cancellation
        raise Interrupted(received[0])
    return result
