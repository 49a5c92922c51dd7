"""What a session says when a step could not be done: its reason, in one shape.

Two places end a session at once because its worker could not set itself up
(``setup_failure`` when the worker's runtime does not open, the step driver when no
sandbox will start for a step); both log the same ``notice`` event, ``setup_failed``,
holding the reason and the text the thread is told, so the chat, the timeline and Slack
read one shape. Any other failed attempt of a step (retried, and given up after
``WARROOM_MAX_CRASHES``) logs a ``step_failed`` event with its reason, so the crash-loop
notice can say what the last attempt met (``last_failure``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from harness import WorkspaceCannotStart
from memory_store import Event, EventKind, NewEvent

__all__ = [
    "MAX_REASON_CHARS",
    "SETUP_FAILED",
    "STEP_FAILED",
    "failure_key",
    "last_failure",
    "reason_of",
    "sandbox_failed_text",
    "setup_failed_event",
    "setup_failed_text",
    "step_failed_event",
    "told",
]

SETUP_FAILED = "setup_failed"
"""The ``notice`` of a session a worker could not set itself up for."""
STEP_FAILED = "step_failed"
"""The event kind of one failed attempt of a step (its ``reason``)."""
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


def step_failed_event(error: BaseException) -> NewEvent:
    """The event an attempt of a step that raised ``error`` logs (``reason_of``)."""
    return NewEvent(STEP_FAILED, json.dumps({"reason": reason_of(error)}))


def last_failure(events: Sequence[Event]) -> str | None:
    """The reason of the last ``step_failed`` event of ``events`` (in seq order), if any.

    >>> from datetime import UTC, datetime
    >>> row = Event("s1", 4, "step_failed", '{"reason": "OSError: no"}', 1, datetime.now(UTC))
    >>> last_failure([row])
    'OSError: no'
    """
    for event in reversed(events):
        if event.kind == STEP_FAILED:
            reason = json.loads(event.payload_json).get("reason")
            return str(reason) if reason else None
    return None
