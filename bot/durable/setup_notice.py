"""What a session says when its worker could not set itself up for a step.

Two places end a session so (``setup_failure`` when the worker's runtime does not open,
the step driver when no sandbox will start for a step); both log the same ``notice``
event, ``setup_failed``, holding the reason and the text the thread is told, so the
chat, the timeline and Slack read one shape.
"""

from __future__ import annotations

import json

from harness import WorkspaceCannotStart
from memory_store import EventKind, NewEvent

__all__ = [
    "MAX_REASON_CHARS",
    "SETUP_FAILED",
    "failure_key",
    "reason_of",
    "sandbox_failed_text",
    "setup_failed_event",
    "setup_failed_text",
    "told",
]

SETUP_FAILED = "setup_failed"
"""The ``notice`` of a session a worker could not set itself up for."""
MAX_REASON_CHARS = 600


def reason_of(error: BaseException) -> str:
    """``error`` as one line of at most ``MAX_REASON_CHARS``: its type, then its text (a
    library's lines joined); a sandbox that cannot start is said in its own words.

    >>> reason_of(FileExistsError(17, "File exists", "/data/gateway"))
    "FileExistsError: [Errno 17] File exists: '/data/gateway'"
    >>> reason_of(WorkspaceCannotStart("bubblewrap exited; log: bwrap: uid map:\\nEPERM"))
    'bubblewrap exited; log: bwrap: uid map: EPERM'
    """
    if isinstance(error, WorkspaceCannotStart):
        said = _one_line(error.reason)
    else:
        text = _one_line(str(error))
        said = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return said if len(said) <= MAX_REASON_CHARS else said[: MAX_REASON_CHARS - 1] + "…"


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def setup_failed_text(reason: str) -> str:
    """What the thread is told when the worker could not open its runtime (plain words;
    ``reason`` from ``reason_of``)."""
    return (
        f"The worker could not set itself up to work on this ({reason}), so nothing ran. "
        "This is a problem of Warroom's configuration or host, not of this thread: whoever "
        "runs Warroom must fix it (`warroom doctor` checks the configuration); then reply "
        "here to try again."
    )


def sandbox_failed_text(reason: str) -> str:
    """What the thread is told when no sandbox would start for a step (``reason`` from
    ``reason_of``)."""
    return (
        f"The worker could not start a sandbox to run commands in ({reason}), so the "
        "command did not run. This is a problem of the host Warroom runs on, not of this "
        "thread: whoever runs Warroom must fix it (`warroom doctor` starts a test sandbox "
        "and says what is wrong); then reply here to try again."
    )


def told(error: BaseException) -> tuple[str, str]:
    """The reason (``reason_of``) and the thread's text for ``error``."""
    reason = reason_of(error)
    if isinstance(error, WorkspaceCannotStart):
        return reason, sandbox_failed_text(reason)
    return reason, setup_failed_text(reason)


def setup_failed_event(reason: str, text: str) -> NewEvent:
    """The ``notice`` event a session failed so is committed with."""
    payload = json.dumps({"notice": SETUP_FAILED, "reason": reason, "text": text})
    return NewEvent(EventKind.NOTICE.value, payload)


def failure_key(session_id: str, epoch: int) -> str:
    """The outbox key of the thread's notice: one post per failure (a failure bumps the
    session's ``epoch``, so a revived session that fails again is told again)."""
    return f"{session_id}:{SETUP_FAILED}:{epoch}"
