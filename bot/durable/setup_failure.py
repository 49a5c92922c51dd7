"""A worker that cannot set itself up for a step ends that session failed, saying why.

Start-up reads every file a step depends on (``bot.cli.preflight``), but a worker opens its
``Runtime`` at its first step, and what it reads then can have changed since: a rules file
edited into YAML that does not parse, a secret file removed, a data directory whose
``gateway/`` cannot be written. Such a failure is permanent for this worker: retrying the
step would fail the same way, and a crash count would only end the session later with a
message that does not say why. So the wake-up's session is claimed and ended ``failed``
at once, with a ``setup_failed`` notice event that holds the reason, and its thread is
told (in Slack, posted once per failure through the outbox; ``warroom chat`` prints the
notice); a subagent's parent gets the failure as the subagent's answer. A reply (or a
line typed in the chat) revives the session, so once the cause is fixed the person tries
again. Transient causes (the database, the model API) stay the actor's retries.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from bot.durable.agents import Enqueue, answer_parent
from bot.durable.setup_notice import (
    SETUP_FAILED,
    failure_key,
    reason_of,
    setup_failed_event,
    setup_failed_text,
    told,
)
from bot.durable.wiring import make_slack_client
from bot.settings import Settings
from bot.slack.poster import SlackPoster, Thread
from bot.slack.render import notice
from harness import Checkpoint, Inbound, held
from memory_store import (
    Database,
    Finish,
    Outbox,
    SessionOrigin,
    SessionStatus,
    SessionStore,
)

log = logging.getLogger(__name__)

__all__ = ["SETUP_FAILED", "fail_setup", "reason_of", "setup_failed_text"]

CLAIM_LEASE = timedelta(seconds=60)


async def fail_setup(
    settings: Settings,
    session_id: str,
    token: str,
    error: BaseException,
    *,
    worker_id: str,
    origin: SessionOrigin,
    enqueue: Enqueue,
    tell_slack: bool,
) -> bool:
    """End ``session_id`` failed because its worker could not set itself up (``error``),
    and tell its thread: in Slack with ``tell_slack`` (else the thread reads the notice
    itself, as ``warroom chat`` does), or its parent session's. What arrived in its inbox
    is kept as the session's pending input (the person's question is still there when
    they reply to try again), unless an approval waits for a decision. Opens its own
    database connection and Slack client.

    Returns False when the wake-up was stale (another worker holds or finished the step):
    nothing was changed.

    Raises:
        DatabaseUnavailable: the database could not be reached (the wake-up is retried).
    """
    reason, text = told(error)
    db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
    try:
        sessions = SessionStore(db)
        claim = await sessions.claim(
            session_id,
            token,
            worker_id=worker_id,
            lease_s=CLAIM_LEASE.total_seconds(),
            origin=origin,
        )
        if claim is None:
            return False
        cp = Checkpoint.from_json(claim.checkpoint)
        waits_for_decision = cp.approval is not None and cp.approval.pending
        if claim.inbox and not waits_for_decision:
            cp = held(cp, tuple(Inbound(i.user_id, i.text, kind=i.kind) for i in claim.inbox))
        await sessions.commit(
            claim,
            checkpoint=cp.state_json(),
            outcome=Finish(SessionStatus.FAILED),
            events=(setup_failed_event(reason, text),),
            consumed_inbox_upto=claim.inbox_upto,
        )
        log.error("session %s failed: the worker could not set itself up: %s", session_id, reason)
        if cp.parent is not None:
            await answer_parent(sessions, enqueue, cp, f"The subagent failed: {text}", failed=True)
        elif tell_slack:
            thread = Thread(session_id, claim.key.channel_id, claim.key.thread_ts)
            key = failure_key(session_id, claim.epoch)
            try:
                slack = SlackPoster(make_slack_client(settings), Outbox(db))
                await slack.post(thread, key, notice(f":x: {text}"))
            except Exception:  # the session has failed either way; the log says why
                log.exception("session %s: could not post the set-up failure", session_id)
        return True
    finally:
        await db.dispose()
