"""``/agent timeline [THREAD_TS]``: the incident's timeline, posted in the channel (§15).

The timeline of the channel (or of one thread, given its root ``ts``) is rendered as
Markdown and posted as the bot to the channel, where everyone sees it: in ``markdown``
blocks when it fits in a few messages, else as a short preview and ``timeline.md``
attached (as long answers are, ``render_answer``). Where the bot cannot post (it is not in
the channel), the person is told so.
"""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackCallFailed, slack_call
from bot.slack.render import FileAnswer, render_answer
from bot.slack.skills.command import SkillsCommand, SkillsCommands
from harness import IncidentRecord

USAGE = (
    "`/agent timeline` posts this channel's incident timeline (`/agent timeline THREAD_TS`: "
    "one thread's); `/agent postmortem` drafts `/incident/postmortem.md` from it."
)
NOT_IN_CHANNEL = ("not_in_channel", "channel_not_found")


class TimelineCommand:
    """The ``/agent timeline`` handler."""

    def __init__(self, record: IncidentRecord, client: AsyncWebClient, skills: SkillsCommands):
        self._record = record
        self._client = client
        self._skills = skills

    async def handle(self, command: SkillsCommand) -> None:
        """Post the timeline to the command's channel (see the module docstring).

        Raises:
            SlackCallFailed, SlackUnreachable: a post or the reply to the person failed.
            DatabaseUnavailable: the event log could not be read.
        """
        words = command.words[1:]
        thread_ts = words[0] if words else None
        markdown = await self._record.timeline_markdown(
            command.org_id, command.channel_id, thread_ts=thread_ts
        )
        try:
            await self._post(command.channel_id, markdown)
        except SlackCallFailed as exc:
            if exc.error not in NOT_IN_CHANNEL:
                raise
            await self._skills.tell(
                command, "I can't post in this channel: invite me (`/invite @warroom`) first."
            )

    async def _post(self, channel_id: str, markdown: str) -> None:
        rendered = render_answer(markdown)
        if isinstance(rendered, FileAnswer):
            await slack_call(
                "files.completeUploadExternal",
                self._client.files_upload_v2(
                    channel=channel_id,
                    content=rendered.content,
                    filename="timeline.md",
                    title="Incident timeline",
                    initial_comment=rendered.preview.text,
                ),
            )
            return
        for message in rendered.messages:
            await slack_call(
                "chat.postMessage",
                self._client.chat_postMessage(
                    channel=channel_id,
                    text=message.text,
                    blocks=list(message.blocks),
                    unfurl_links=False,
                    unfurl_media=False,
                ),
            )
