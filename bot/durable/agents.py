"""Subagents as durable child sessions (``Agent``; docs/architecture.md §5, "Long work").

``ChildSessions`` is the harness's ``AgentSpawner`` for one step of a parent session: a
child is an ordinary session (own row, transcript and checkpoint) keyed under the
parent's thread, sharing its org, incident and sandbox, and marked with a
``ParentLink``; its first input is the task's prompt, and its first step is enqueued
at once, so children run in parallel on whichever workers are free. When a child
answers, ``answer_parent`` records the answer in the parent's inbox (kind ``agent``:
the call's ``tool_result``; a background child: a ``<task-notification>``), keyed
``agent:<tool_use_id>`` so it arrives once, and the child ends ``done``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

from harness import (
    AGENT_RESULT_KIND,
    NOTIFICATION_KIND,
    AgentRecord,
    Checkpoint,
    ParentLink,
    agent_notification,
    agent_result_text,
)
from memory_store import SessionKey, SessionNotFound, SessionOrigin, SessionStore

Enqueue = Callable[[str, str], Awaitable[None]]


def child_session_id(parent_id: str, tool_use_id: str) -> str:
    """The child session's id: the same for one ``Agent`` call every time (≤ 64 chars).

    >>> child_session_id("s-1", "toolu_abc")
    's-1-agent-38bd4e3d02'
    """
    digest = hashlib.sha256(f"{parent_id}:{tool_use_id}".encode()).hexdigest()[:10]
    return f"{parent_id[:44]}-agent-{digest}"


class ChildSessions:
    """Starts the subagents of one parent step (``harness.AgentSpawner``).

    Args:
        sessions: the session store.
        enqueue: sends a child's first step to a worker.
        parent: the parent's checkpoint at this step (its sandbox is shared).
        key: the parent's session key (a child is keyed under its thread).
        origin: the parent's origin (the same workers serve the child).
    """

    def __init__(
        self,
        sessions: SessionStore,
        enqueue: Enqueue,
        parent: Checkpoint,
        key: SessionKey,
        origin: SessionOrigin,
    ) -> None:
        self._sessions = sessions
        self._enqueue = enqueue
        self._parent = parent
        self._key = key
        self._origin = origin

    async def spawn(
        self, *, tool_use_id: str, description: str, prompt: str, background: bool
    ) -> str:
        """Create the child once per ``tool_use_id`` and enqueue its first step.

        Raises:
            DatabaseUnavailable: the database could not be reached.
        """
        parent = self._parent
        child_id = child_session_id(parent.session_id, tool_use_id)
        cp = Checkpoint(
            child_id,
            parent.org_id,
            parent.channel_id,
            parent.requester,
            sandbox=parent.sandbox,
            parent=ParentLink(parent.session_id, tool_use_id, background, description),
        )
        thread_ts = f"{self._key.thread_ts}/{tool_use_id}"[:64]
        opened = await self._sessions.open_or_join(
            SessionKey(self._key.org_id, self._key.channel_id, thread_ts),
            requester_id=parent.requester.user_id,
            initial_checkpoint=cp.to_json(),
            text=prompt,
            source_ts=f"agent:{tool_use_id}"[:64],
            session_id=child_id,
            origin=self._origin,
        )
        if opened.token is not None:
            await self._enqueue(child_id, opened.token)
        return child_id


async def answer_parent(
    sessions: SessionStore, enqueue: Enqueue, child: Checkpoint, answer: str, *, failed: bool
) -> None:
    """Give a child's answer to its parent, once (see the module docstring); nothing when
    ``child`` is not a subagent or its parent is gone.

    Raises:
        DatabaseUnavailable: the database could not be reached.
    """
    link = child.parent
    if link is None:
        return
    if link.background:
        record = AgentRecord(link.tool_use_id, child.session_id, link.description, True, 0.0)
        kind, text = NOTIFICATION_KIND, agent_notification(record, answer, failed=failed)
    else:
        kind, text = AGENT_RESULT_KIND, agent_result_text(link.tool_use_id, answer, failed=failed)
    try:
        token = await sessions.notify(
            link.session_id, kind=kind, text=text, source_key=f"agent:{link.tool_use_id}"[:64]
        )
    except SessionNotFound:
        return
    if token is not None:
        await enqueue(link.session_id, token)
