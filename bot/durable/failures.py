"""A session given up by the sweeper: its failure told once, in its thread or to its parent.

The notice is posted through the outbox under a key naming what it is: the session, the
kind (``failed``) and the failure, i.e. the epoch the failing sweep gave the session
(``Session.epoch``; a failure bumps it and a post does not). Two sweeps telling one
failure post once; a session revived by a reply that fails again is a new failure and
is told again. (The key was the session's last event sequence, which moves with
anything logged after the failure, so one failure could be posted twice; issue #32.5.)
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.durable.agents import answer_parent
from bot.durable.driver import Enqueue
from bot.durable.setup_notice import last_failure
from bot.slack.poster import SlackPoster, Thread
from bot.slack.render import render_session_failed
from harness import Checkpoint
from memory_store import Session, SessionStore

log = logging.getLogger(__name__)

RECENT_EVENTS = 20
"""How far back the last attempt's reason is looked for (one event per failed attempt,
the failure's notice last)."""


def failure_key(session: Session) -> str:
    """The outbox key of ``session``'s failure notice: ``<session>:failed:<epoch>``.

    Read after the failing sweep (which set the epoch) and before any later claim.
    """
    return f"{session.id}:failed:{session.epoch}"


async def tell_failed(
    sessions: SessionStore,
    slack: SlackPoster | None,
    enqueue: Enqueue,
    session_id: str,
    *,
    crashes: int,
    end_session: Callable[[Thread], Awaitable[None]] | None = None,
) -> Checkpoint | None:
    """Say, once per failure, that ``session_id`` was given up after ``crashes`` crashes,
    and what its last attempt met when it logged that (``setup_notice.last_failure``): a
    notice in its thread, or a subagent's failure as its parent's answer. Best effort: a
    Slack failure is logged. ``end_session`` then closes the thread's Slack agent session
    (``ThreadReporter.end_session``), which the failed step may have left ``processing``.

    Returns:
        The failed session's checkpoint (None: no such session).
    """
    session = await sessions.get(session_id)
    if session is None:
        return None
    cp = Checkpoint.from_json(session.checkpoint)
    recent = await sessions.events(session_id, max(0, session.last_seq - RECENT_EVENTS))
    reason = last_failure(recent)
    if cp.parent is not None:
        text = f"The subagent failed: its step crashed its worker {crashes} times."
        if reason is not None:
            text += f" The last time: {reason}."
        await answer_parent(sessions, enqueue, cp, text, failed=True)
        return cp
    if slack is not None:
        thread = Thread(session_id, session.key.channel_id, session.key.thread_ts)
        message = render_session_failed(crashes=crashes, reason=reason)
        try:
            await slack.post(thread, failure_key(session), message)
        except Exception:
            log.exception("session %s: could not post the failure notice", session_id)
        if end_session is not None:
            try:
                await end_session(thread)
            except Exception:
                log.exception("session %s: its agent session was not closed", session_id)
    return cp
