"""``/agent postmortem``: start the session that drafts this incident's postmortem (§15).

A slash command has no thread, so the bot opens one: it posts a short message in the
channel and starts a session on it with what the person typed, ``/agent postmortem``
(the record shows it so; the harness asks the model ``harness.postmortem_request()``:
read the timeline and the notes, write ``/incident/postmortem.md``, cite every claim).
The session runs like any other; its progress and its answer go to that thread.
``@warroom postmortem`` in a thread does the same without the extra message.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackCallFailed, slack_call
from bot.slack.skills.command import SkillsCommand, SkillsCommands
from harness import POSTMORTEM_PATH, Checkpoint, Requester
from memory_store import SessionKey, SessionStore

NOT_IN_CHANNEL = ("not_in_channel", "channel_not_found")
SLASH_REQUEST = "/agent postmortem"
"""What the person typed, recorded as their message (``harness.is_postmortem_request``)."""


class PostmortemCommand:
    """The ``/agent postmortem`` handler."""

    def __init__(
        self,
        sessions: SessionStore,
        client: AsyncWebClient,
        enqueue: Callable[[str, str], Awaitable[None]],
        skills: SkillsCommands,
    ) -> None:
        self._sessions = sessions
        self._client = client
        self._enqueue = enqueue
        self._skills = skills

    async def handle(self, command: SkillsCommand) -> None:
        """Open the postmortem thread and start its session (see the module docstring).

        Raises:
            SlackCallFailed, SlackUnreachable: the thread could not be opened, or the
                person could not be told why.
            DatabaseUnavailable: the session could not be recorded.
        """
        text = (
            f"<@{command.user_id}> asked for the postmortem of this incident: drafting "
            f"`{POSTMORTEM_PATH}` from the timeline and the notes, every claim citing the "
            "timeline. Follow it in this thread; edit the file like any other when it is done."
        )
        try:
            posted = await slack_call(
                "chat.postMessage",
                self._client.chat_postMessage(channel=command.channel_id, text=text),
            )
        except SlackCallFailed as exc:
            if exc.error not in NOT_IN_CHANNEL:
                raise
            await self._skills.tell(
                command, "I can't post in this channel: invite me (`/invite @warroom`) first."
            )
            return
        await self._start(command, str(posted["ts"]))

    async def _start(self, command: SkillsCommand, ts: str) -> None:
        session_id = uuid.uuid4().hex
        checkpoint = Checkpoint(
            session_id,
            command.org_id,
            command.channel_id,
            Requester(command.user_id),
            title="Postmortem",
        )
        opened = await self._sessions.open_or_join(
            SessionKey(command.org_id, command.channel_id, ts),
            requester_id=command.user_id,
            initial_checkpoint=checkpoint.to_json(),
            text=SLASH_REQUEST,
            source_ts=ts,
            session_id=session_id,
        )
        if opened.token is not None:
            await self._enqueue(opened.session_id, opened.token)
