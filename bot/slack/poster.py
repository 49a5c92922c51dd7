"""Posting to Slack threads: idempotent across retries and crashes, throttled, rate-limit aware.

``chat.postMessage`` has no idempotency key (docs/architecture.md §5), so every post goes
through the outbox: record the intent keyed ``"<session>:<seq>"``, post with message
``metadata`` ``{"event_type": "warroom_post", "event_payload": {"key": …}}``, record
the ``ts``. An intent found without a ``ts`` means a worker died between posting and
recording: the thread is searched (``conversations.replies`` with
``include_all_metadata``) for the key before anything is posted again. Files are
found again by their name, which carries the key.

Status updates (``chat.update``, Slack: ~50/min per workspace) are coalesced per
message, sent at most once per ``min_update_interval_s`` per message and within the
workspace's ``CallBudget`` across messages; the latest state wins and the final state
is always sent. HTTP 429 answers are waited out for ``Retry-After``
seconds by slack_sdk's ``AsyncRateLimitErrorRetryHandler``; a post is never re-sent by
the client after a connection error (``retries``): the outbox's search above covers it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import ContentTooLong, SlackCallFailed, slack_call
from bot.slack import retries
from bot.slack.budget import CallBudget
from bot.slack.render import (
    DEFAULT_MAX_ANSWER_MESSAGES,
    THINKING_STATUS,
    FileAnswer,
    InlineAnswer,
    SlackMessage,
    notice,
    render_answer,
)

logger = logging.getLogger(__name__)

METADATA_EVENT_TYPE = "warroom_post"
_REPLIES_PAGE = 200
_MAX_REPLY_PAGES = 50
RACED_POST_WAIT_S = 10.0
"""How long a poster that lost the race to record a key's intent waits for the winner's
``ts`` before looking for the post in the thread itself (a post takes well under it)."""
IN_FLIGHT_S = 3.0
"""An intent younger than this with no ``ts`` is taken for a post still on its way (its
``chat.postMessage`` not answered yet): the poster waits for it to be recorded until the
intent is this old, then looks for it in the thread (a crashed poster's). Slack answers a
post in well under a second; a longer wait would only delay a crashed post's recovery."""
_RACED_POLL_S = 0.1
POSTED_MEMO_SIZE = 4096
"""Post keys whose recorded ``ts`` a poster remembers (a key's ts never changes once
recorded, so a remembered one spares the outbox read of every later progress update)."""


class PostRecord(Protocol):
    """What the poster reads from an outbox row (``memory_store.OutboxItem`` fits)."""

    @property
    def key(self) -> str: ...

    @property
    def ts(self) -> str | None: ...

    @property
    def created(self) -> bool: ...

    @property
    def created_at(self) -> datetime: ...  # when the intent was recorded (aware)


class Outbox(Protocol):
    """The durable record of Slack posts (memory_store's session store).

    ``post_intent`` records an intent once per ``key`` (a second call with the same key
    returns the existing row, ``created`` False); ``post_done`` sets its ``ts`` (for a
    file: the file id);
    ``get_post`` returns the row, or None when no intent was ever recorded.
    """

    async def post_intent(
        self,
        session_id: str,
        key: str,
        *,
        channel_id: str,
        thread_ts: str,
        kind: str,
        payload_json: str,
    ) -> PostRecord: ...

    async def post_done(self, key: str, ts: str) -> PostRecord: ...

    async def get_post(self, key: str) -> PostRecord | None: ...


@dataclass(frozen=True)
class Thread:
    """Where a session posts: its id and its Slack thread."""

    session_id: str
    channel_id: str
    thread_ts: str


@dataclass(frozen=True)
class AnswerPosted:
    """What ``post_answer`` left in the thread: message ts's in order, and a file id
    when (part of) the answer went as a file."""

    message_ts: tuple[str, ...]
    file_id: str | None = None


@dataclass
class _StatusSlot:
    pending: SlackMessage | None = None
    last_sent_at: float | None = None
    task: asyncio.Task[None] | None = None
    failure: SlackCallFailed | None = None


class SlackPoster:
    """Posts a session's messages, files and status updates to its Slack thread.

    Args:
        client: the Slack client; its retry handlers are replaced by ``retries.install``
            (429s waited out; connection errors never re-send a post).
        outbox: the durable post record (see ``Outbox``).
        min_update_interval_s: least time between two ``chat.update`` of one message.
        max_answer_messages: an answer needing more messages is uploaded as a file.
        clock: monotonic seconds, for spacing status updates.
        update_budget: the workspace's ``chat.update`` budget shared by all status
            messages (default: ``CHAT_UPDATE_PER_MINUTE`` a minute, Slack's Tier 3).
    """

    def __init__(
        self,
        client: AsyncWebClient,
        outbox: Outbox,
        *,
        min_update_interval_s: float = 1.0,
        max_answer_messages: int = DEFAULT_MAX_ANSWER_MESSAGES,
        clock: Callable[[], float] = time.monotonic,
        update_budget: CallBudget | None = None,
    ) -> None:
        self._client = client
        self._update_budget = update_budget or CallBudget()
        self._outbox = outbox
        self._interval_s = min_update_interval_s
        self._max_answer_messages = max_answer_messages
        self._clock = clock
        self._slots: dict[tuple[str, str], _StatusSlot] = {}
        self._posted: OrderedDict[str, str] = OrderedDict()
        retries.install(client)

    # ----- idempotent posts ----------------------------------------------------------

    async def post(
        self, thread: Thread, key: str, message: SlackMessage, *, kind: str = "message"
    ) -> str:
        """Post ``message`` once per ``key``, whatever retries or crashes happen; returns its ts.

        Raises:
            ContentTooLong: Slack refused the message's size (nothing was posted).
            SlackCallFailed: any other Slack failure (the intent stays; a retry is safe).
        """
        payload = json.dumps({"text": message.text, "blocks": list(message.blocks)})
        found = await self._recorded_or_recovered(thread, key, kind, payload, _has_key(key))
        if found is not None:
            return found
        response = await slack_call(
            "chat.postMessage",
            self._client.chat_postMessage(
                channel=thread.channel_id,
                thread_ts=thread.thread_ts,
                text=message.text,
                blocks=list(message.blocks),
                metadata={"event_type": METADATA_EVENT_TYPE, "event_payload": {"key": key}},
                unfurl_links=False,
                unfurl_media=False,
            ),
        )
        return await self._recorded(key, str(response["ts"]))

    async def recorded_ts(self, key: str) -> str | None:
        """The ``ts`` (or file id) the outbox recorded for ``key``, or None."""
        if (known := self._posted.get(key)) is not None:
            return known
        record = await self._outbox.get_post(key)
        return self._remember(key, record.ts) if record is not None and record.ts else None

    async def _recorded(self, key: str, ts: str) -> str:
        """Record ``ts`` as ``key``'s post; returns (and remembers) the ts the outbox
        keeps: the first recorded, which is another worker's when two posted at once."""
        item = await self._outbox.post_done(key, ts)
        return self._remember(key, item.ts or ts)

    def _remember(self, key: str, ts: str) -> str:
        """Keep ``key``'s recorded ``ts`` (the most recent ``POSTED_MEMO_SIZE`` keys)."""
        self._posted[key] = ts
        self._posted.move_to_end(key)
        if len(self._posted) > POSTED_MEMO_SIZE:
            self._posted.popitem(last=False)
        return ts

    async def post_file(
        self,
        thread: Thread,
        key: str,
        *,
        filename: str,
        content: str,
        title: str,
        comment: str | None = None,
    ) -> str:
        """Upload ``content`` into the thread once per ``key``; returns the file id.

        The file's name is ``filename`` with the key appended before the extension
        (``answer.md`` → ``answer-<session>-<seq>.md``): that is how a crashed upload
        is found again. Uses ``files_upload_v2`` (``files.getUploadURLExternal``, the
        upload, ``files.completeUploadExternal``).

        Raises:
            SlackCallFailed: the upload failed (the intent stays; a retry is safe).
        """
        name = keyed_filename(filename, key)
        payload = json.dumps({"filename": name, "title": title, "chars": len(content)})
        found = await self._recorded_or_recovered(thread, key, "file", payload, _has_file(name))
        if found is not None:
            return found
        response = await slack_call(
            "files.completeUploadExternal",
            self._client.files_upload_v2(
                channel=thread.channel_id,
                thread_ts=thread.thread_ts,
                content=content,
                filename=name,
                title=title,
                initial_comment=comment,
            ),
        )
        return await self._recorded(key, str(response["files"][0]["id"]))

    async def _recorded_or_recovered(
        self,
        thread: Thread,
        key: str,
        kind: str,
        payload_json: str,
        matches: Callable[[Mapping[str, Any]], str | None],
    ) -> str | None:
        if (known := self._posted.get(key)) is not None:
            return known
        record = await self._outbox.get_post(key)
        if record is not None and record.ts:
            return self._remember(key, record.ts)
        if record is None:
            intent = await self._outbox.post_intent(
                thread.session_id,
                key,
                channel_id=thread.channel_id,
                thread_ts=thread.thread_ts,
                kind=kind,
                payload_json=payload_json,
            )
            if intent.created:
                return None
            if (ts := await self._winners_ts(key)) is not None:
                return ts
        elif (left_s := IN_FLIGHT_S - _age_s(record.created_at)) > 0 and (
            # an intent without its ts, recorded a moment ago: another poster is most
            # likely posting it now (its Slack call not answered yet), not a crashed one
            ts := await self._winners_ts(key, wait_s=left_s)
        ):
            return ts
        found = await self._search_thread(thread, matches)
        if found is not None:
            logger.info("post %s was made before a crash; recorded %s", key, found)
            return await self._recorded(key, found)
        return found

    async def _winners_ts(self, key: str, *, wait_s: float = RACED_POST_WAIT_S) -> str | None:
        """The ``ts`` another poster records for ``key`` within ``wait_s`` (it recorded
        the intent a moment before this one tried), or None."""
        deadline = time.monotonic() + wait_s
        while True:
            record = await self._outbox.get_post(key)
            if record is not None and record.ts:
                return self._remember(key, record.ts)
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(_RACED_POLL_S)  # the winner's post is a Slack call away

    async def _search_thread(
        self, thread: Thread, matches: Callable[[Mapping[str, Any]], str | None]
    ) -> str | None:
        cursor: str | None = None
        for _ in range(_MAX_REPLY_PAGES):
            page = await slack_call(
                "conversations.replies",
                self._client.conversations_replies(
                    channel=thread.channel_id,
                    ts=thread.thread_ts,
                    include_all_metadata=True,
                    limit=_REPLIES_PAGE,
                    cursor=cursor,
                ),
            )
            for message in page.get("messages") or []:
                if (found := matches(message)) is not None:
                    return found
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None:
                return None
        return None

    # ----- answers and long output -----------------------------------------------------

    async def post_answer(self, thread: Thread, key: str, markdown: str) -> AnswerPosted:
        """Post the model's final answer: Slack ``markdown`` blocks, split, or a file.

        Parts after the first use keys ``<key>/2``, ``<key>/3``…; a file uses
        ``<key>/file``. If Slack refuses a part's size (``msg_too_long`` and kin), that
        part and the rest are uploaded as one file instead.

        Raises:
            SlackCallFailed: a post or upload failed (safe to retry with the same key).
        """
        rendered = render_answer(markdown, max_messages=self._max_answer_messages)
        if isinstance(rendered, FileAnswer):
            return await self._post_file_answer(thread, key, rendered)
        return await self._post_inline_answer(thread, key, rendered)

    async def _post_inline_answer(
        self, thread: Thread, key: str, answer: InlineAnswer
    ) -> AnswerPosted:
        posted: list[str] = []
        for i, message in enumerate(answer.messages):
            part_key = key if i == 0 else f"{key}/{i + 1}"
            try:
                posted.append(await self.post(thread, part_key, message, kind="answer"))
            except ContentTooLong as exc:
                logger.warning("answer part %s refused (%s); sending it as a file", part_key, exc)
                rest = "\n\n".join(_markdown_of(m) for m in answer.messages[i:])
                file_id = await self._post_rest_as_file(thread, key, rest, continued=i > 0)
                return AnswerPosted(tuple(posted), file_id)
        return AnswerPosted(tuple(posted))

    async def _post_file_answer(self, thread: Thread, key: str, answer: FileAnswer) -> AnswerPosted:
        try:
            ts = await self.post(thread, key, answer.preview, kind="answer")
        except ContentTooLong:
            ts = await self.post(thread, key, notice("The answer is attached as a file."))
        file_id = await self.post_file(
            thread, f"{key}/file", filename=answer.filename, content=answer.content, title="Answer"
        )
        return AnswerPosted((ts,), file_id)

    async def _post_rest_as_file(
        self, thread: Thread, key: str, rest: str, *, continued: bool
    ) -> str:
        what = "The rest of this answer" if continued else "This answer"
        return await self.post_file(
            thread,
            f"{key}/file",
            filename="answer.md",
            content=rest,
            title="Answer" + (" (continued)" if continued else ""),
            comment=f"{what} is too long for Slack messages, so here it is as a file.",
        )

    async def post_tool_output(self, thread: Thread, key: str, *, command: str, output: str) -> str:
        """Upload a long tool output as a text file in the thread; returns the file id."""
        first_line = command.strip().splitlines()[0] if command.strip() else "command"
        return await self.post_file(
            thread,
            key,
            filename="output.txt",
            content=output,
            title=f"Output of {first_line}"[:250],
            comment=f"Full output of `{first_line[:200]}` ({len(output.splitlines())} lines).",
        )

    # ----- status ------------------------------------------------------------------

    async def set_thinking(self, thread: Thread, status: str = THINKING_STATUS) -> bool:
        """Show Slack's native "is thinking…" line (``assistant.threads.setStatus``);
        ``""`` clears it. Failures are logged, not raised: it is decoration. Returns
        whether Slack accepted it."""
        try:
            await slack_call(
                "assistant.threads.setStatus",
                self._client.assistant_threads_setStatus(
                    channel_id=thread.channel_id, thread_ts=thread.thread_ts, status=status
                ),
            )
        except SlackCallFailed as exc:
            logger.info("assistant.threads.setStatus failed: %s", exc)
            return False
        return True

    async def update_status(
        self, channel_id: str, ts: str, message: SlackMessage, *, final: bool = False
    ) -> None:
        """Replace the status message's content, at most once per ``min_update_interval_s``.

        Non-final updates return at once; an update arriving while one is pending
        replaces it (the latest state wins). ``final=True`` waits until the latest
        state has been sent.

        Raises:
            SlackCallFailed: only with ``final=True``, when the last send failed.
        """
        slot = self._slots.setdefault((channel_id, ts), _StatusSlot())
        slot.pending = message
        if slot.task is None or slot.task.done():
            slot.task = asyncio.create_task(self._drain(channel_id, ts, slot))
        if final:
            await asyncio.shield(slot.task)
            self._forget_if_idle((channel_id, ts))
            if slot.failure is not None:
                raise slot.failure

    def _forget_if_idle(self, key: tuple[str, str]) -> None:
        """Drop a message's slot once its final state is sent (the turn is over)."""
        slot = self._slots.get(key)
        if slot is not None and slot.pending is None and slot.task is not None and slot.task.done():
            del self._slots[key]

    async def flush(self) -> None:
        """Wait until every pending status update has been sent (or has failed)."""
        tasks = [slot.task for slot in self._slots.values() if slot.task is not None]
        await asyncio.gather(*tasks)

    async def _drain(self, channel_id: str, ts: str, slot: _StatusSlot) -> None:
        while slot.pending is not None:
            if slot.last_sent_at is not None:
                wait_s = slot.last_sent_at + self._interval_s - self._clock()
                if wait_s > 0:
                    await asyncio.sleep(wait_s)
            await self._update_budget.take()  # updates arriving meanwhile replace pending
            message, slot.pending = slot.pending, None
            try:
                await self._send_update(channel_id, ts, message)
                slot.failure = None
            except SlackCallFailed as exc:
                logger.warning("status update of %s failed: %s", ts, exc)
                slot.failure = exc
            slot.last_sent_at = self._clock()

    @property
    def update_budget(self) -> CallBudget:
        """The workspace's ``chat.update`` budget this poster's updates take turns from."""
        return self._update_budget

    async def update_now(self, channel_id: str, ts: str, message: SlackMessage) -> None:
        """One ``chat.update`` of message ``ts``, now; the caller took the budget's turn.

        Raises:
            SlackCallFailed: Slack refused it or could not be reached.
        """
        await self._send_update(channel_id, ts, message)

    async def record_intent(
        self, thread: Thread, key: str, *, kind: str, payload_json: str
    ) -> None:
        """Record ``key`` in the outbox without posting anything (a marker others read
        with ``recorded_intent``). Raises DatabaseUnavailable."""
        await self._outbox.post_intent(
            thread.session_id,
            key,
            channel_id=thread.channel_id,
            thread_ts=thread.thread_ts,
            kind=kind,
            payload_json=payload_json,
        )

    async def claim_intent(
        self, thread: Thread, key: str, *, kind: str, payload_json: str = "{}"
    ) -> bool:
        """Record ``key``'s intent; True if this call recorded it (False: some process
        already had). Raises DatabaseUnavailable."""
        intent = await self._outbox.post_intent(
            thread.session_id,
            key,
            channel_id=thread.channel_id,
            thread_ts=thread.thread_ts,
            kind=kind,
            payload_json=payload_json,
        )
        return intent.created

    async def recorded_intent(self, key: str) -> bool:
        """Whether any process recorded ``key`` in the outbox. Raises DatabaseUnavailable."""
        return key in self._posted or await self._outbox.get_post(key) is not None

    async def record_done(self, key: str, ts: str) -> None:
        """Record that ``key``'s intent is carried out, as Slack message ``ts``."""
        await self._recorded(key, ts)

    @property
    def client(self) -> AsyncWebClient:
        """The Slack client this poster calls (its retry handlers installed)."""
        return self._client

    async def _send_update(self, channel_id: str, ts: str, message: SlackMessage) -> None:
        await slack_call(
            "chat.update",
            self._client.chat_update(
                channel=channel_id, ts=ts, text=message.text, blocks=list(message.blocks)
            ),
        )


def keyed_filename(filename: str, key: str) -> str:
    """``filename`` with the post key worked in before the extension.

    >>> keyed_filename("answer.md", "s-1:42/file")
    'answer-s-1-42-file.md'
    """
    stem, dot, ext = filename.rpartition(".")
    if not dot:
        stem, ext = filename, ""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", key).strip("-")
    return f"{stem}-{slug}{dot}{ext}"


def _has_key(key: str) -> Callable[[Mapping[str, Any]], str | None]:
    def matches(message: Mapping[str, Any]) -> str | None:
        metadata = message.get("metadata") or {}
        payload = metadata.get("event_payload") or {}
        if metadata.get("event_type") == METADATA_EVENT_TYPE and payload.get("key") == key:
            return str(message["ts"])
        return None

    return matches


def _has_file(name: str) -> Callable[[Mapping[str, Any]], str | None]:
    def matches(message: Mapping[str, Any]) -> str | None:
        for file in message.get("files") or []:
            if file.get("name") == name:
                return str(file["id"])
        return None

    return matches


def _markdown_of(message: SlackMessage) -> str:
    return "\n\n".join(
        str(b.get("text", "")) for b in message.blocks if b.get("type") == "markdown"
    )


def _age_s(at: datetime) -> float:
    """Seconds since ``at`` (an outbox row's time, timezone-aware), by this host's clock."""
    return (datetime.now(UTC) - at).total_seconds()
