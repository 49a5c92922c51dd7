"""``warroom fake-slack``: the fake Slack Web API, to try ``serve`` in HTTP mode without Slack.

It serves the Web API ``serve`` calls (``auth.test``, ``chat.postMessage``,
``chat.update``, ``conversations.replies``, …) with the fake's token, and prints the
variables that point ``serve`` at it. With ``--events-url`` it also plays the
channel: each line typed is a message in ``#incident`` (the first, and one starting
``@warroom``, @mentions the bot and opens a thread; later ones reply in the latest),
stored in the fake and delivered to the app as a signed Events API request, as Slack
would; ``top: …`` posts at the top without a mention; ``alert: SOURCE [resolved]``
is an alerting app's post there (Alertmanager, Grafana, PagerDuty, Datadog, Sentry,
Opsgenie, shaped as each posts; in a watched channel it starts a session, and later
lines reply in its thread); ``/agent …`` is the slash command; in a modal the app
opened, ``set BLOCK TEXT`` and ``submit`` send a signed ``view_submission``. What the
bot posts or edits, its replies only you see and its modals (as opened, and again each
time the app updates one: a loading modal filled in) are printed
(``warroom:``), each message as its blocks read in Slack (``fake_slack_render``: an
approval request's command and buttons, a timeline's entries), not only its fallback
text. A line that is just ``approve`` or ``deny`` clicks that button of the bot's latest
approval request in the thread (§13), as a signed ``block_actions`` interaction. The
thread's agent session (its status and title) and its streamed steps (each tool call a
task: ◐ running, ● done, ✗ failed, ■ stopped; the plan; the model's notes) are printed
as they change, in Slack's order (Slack's agent surface is ``serve``'s default; with
``WARROOM_AGENT_SURFACE=false`` it edits a status message instead), and ``click stop``
clicks Slack's own Stop, sent as a signed ``agent_session_stopped`` event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx

from bot.cli.fake_slack_render import render_message
from bot.drill.channel import IncidentChannel, Person
from bot.drill.errors import DrillError
from bot.fakes.slack_agents import Change
from bot.fakes.slack_alerts import SOURCES, alert_post
from bot.fakes.slack_api import BOT_ID, BOT_USER_ID, TEAM_ID, FakeSlackApi
from bot.slack.action_ids import APPROVE_ACTION_ID, DENY_ACTION_ID

__all__ = ["CHANNEL", "LINES", "SIGNING_SECRET", "deliver_lines", "exports", "watch_channel"]

CHANNEL = "C0INCIDENT"
SIGNING_SECRET = "fake-signing-secret"
YOU = "U0YOU"
WATCH_S = 0.2  # how often the channel is looked at for the bot's posts


def exports(fake: FakeSlackApi) -> str:
    """The shell line that points ``warroom serve`` at the fake, in HTTP mode."""
    return (
        f"export WARROOM_SLACK_MODE=http SLACK_API_URL={fake.base_url} "
        f"SLACK_BOT_TOKEN={fake.token} SLACK_SIGNING_SECRET={SIGNING_SECRET}"
    )


async def deliver_lines(
    fake: FakeSlackApi, events_url: str, lines: AsyncIterator[str], say: Callable[[str], None]
) -> None:
    """Deliver each line to the app as what it says (``LINES``; see the module doc) until
    ``lines`` ends; a line the app did not take is reported with ``say`` (and the next line
    tries again)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        channel = IncidentChannel(
            http=http,
            url=events_url,
            secret=SIGNING_SECRET,
            slack=fake,
            org_id=TEAM_ID,
            channel_id=CHANNEL,
        )
        player = _Player(fake, channel, say)
        async for line in lines:
            if line.strip():
                try:
                    await player.play(line.strip())
                except DrillError as exc:
                    say(f"not delivered: {exc}")


LINES = (
    "what you type: a message replies in the latest thread (the first, or one starting "
    "@warroom, opens a new thread); 'top: TEXT' posts at the top of #incident without a "
    "mention; '/agent …' runs the slash command; 'approve' or 'deny' clicks that button; "
    "'click stop' clicks Slack's Stop of the agent session; "
    "in an open modal, 'set BLOCK TEXT' fills an input ('\\n' for a new line, '@FILE' for a "
    "file's text), then 'submit' or 'close'"
)


class _Player:
    """Turns typed lines into what a person does in Slack (``LINES``)."""

    def __init__(
        self, fake: FakeSlackApi, channel: IncidentChannel, say: Callable[[str], None]
    ) -> None:
        self.fake, self.channel, self.say = fake, channel, say
        self.thread_ts: str | None = None
        self.view_id: str | None = None
        self.values: dict[str, str | None] = {}
        self._views_seen = set(fake.state.views)
        self._view_hash = ""  # the open view's hash when its inputs were last read
        self._typed: set[str] = set()  # the open view's inputs typed in ("set")

    async def play(self, line: str) -> None:
        you = Person(YOU, "you", line)
        word = line.lower()
        self._notice_new_view()
        if line.startswith("/"):
            command, _, text = line.partition(" ")
            answer = await self.channel.command(you, command, text.strip())
            if answer:
                self.say(f"warroom (only you): {answer}")
        elif line.lower().startswith("top:"):
            await self.channel.post(Person(YOU, "you", line[4:].strip()))
        elif word.startswith("alert:"):
            await self._alert(word[6:].split())
        elif self.view_id is not None and word.split(" ", 1)[0] in ("set", "submit", "close"):
            await self._modal(you, line)
        elif self.thread_ts is None or word.startswith(("@warroom", "<@")):
            self.thread_ts = await self.channel.mention(you)
        elif word in CLICKS:
            await _click(self.fake, self.channel, you, CLICKS[word], self.thread_ts, self.say)
        elif word == NATIVE_STOP:
            await _native_stop(self.fake, self.channel, you, self.thread_ts, self.say)
        else:
            await self.channel.reply(you, self.thread_ts)

    async def _alert(self, words: list[str]) -> None:
        """``alert: SOURCE [resolved]``: the app's post; later lines reply in its thread."""
        source = words[0] if words else ""
        if source not in SOURCES:
            self.say(f"alert from what? one of: {', '.join(SOURCES)}")
            return
        resolved = words[1:2] == ["resolved"]
        ts = await self.channel.app_post(alert_post(source, resolved=resolved))
        if not resolved:
            self.thread_ts = ts
        self.say(f"{source} posted {'its resolve' if resolved else 'an alert'} (ts {ts})")

    def _notice_new_view(self) -> None:
        """Take the modal the app opened last (views.open after a command) as the open one,
        and read its inputs again when the app replaced it (views.update: a loading modal
        filled in), keeping what was typed in an input it kept, as Slack does."""
        new = [v for v in self.fake.state.views if v not in self._views_seen]
        self._views_seen.update(new)
        if new:
            self.view_id, self.values, self._typed, self._view_hash = new[-1], {}, set(), ""
        view = self.fake.state.views.get(self.view_id) if self.view_id is not None else None
        if view is None or view["hash"] == self._view_hash:
            return
        self._view_hash = view["hash"]
        self.values = {
            block: self.values[block] if block in self._typed else initial
            for block, initial in _inputs(view).items()
        }

    async def _modal(self, you: Person, line: str) -> None:
        assert self.view_id is not None
        word, _, rest = line.partition(" ")
        if word.lower() == "close":
            self.view_id = None
            return
        if word.lower() == "set":
            block, _, text = rest.strip().partition(" ")
            if block not in self.values:
                self.say(f"no input {block!r} in the modal; its inputs: {', '.join(self.values)}")
                return
            self.values[block] = _typed_value(text)
            self._typed.add(block)
            return
        view = self.fake.state.views[self.view_id]
        if not view.get("submit"):  # Slack shows no Submit button: nothing to click
            self.say("the modal has no Submit button (yet): type 'close', or wait for it")
            return
        answer = await self.channel.submit(you, view, self.values)
        action = answer.get("response_action")
        errors = answer.get("errors") if action == "errors" else None
        if errors:
            self.say("the modal says: " + "; ".join(f"{k}: {v}" for k, v in errors.items()))
            return
        self.say("submitted")
        if action == "update" and isinstance(answer.get("view"), dict):
            self.fake.replace_view(self.view_id, answer["view"])  # the modal shows it
            return
        self.view_id = None


def _inputs(view: dict[str, Any]) -> dict[str, str | None]:
    """``view``'s inputs: block id → initial value."""
    return {
        str(b["block_id"]): (b.get("element") or {}).get("initial_value")
        for b in view.get("blocks") or ()
        if b.get("type") == "input"
    }


def _typed_value(text: str) -> str:
    """A typed input value: ``@FILE`` reads the file; ``\\n`` is a new line."""
    if text.startswith("@"):
        return Path(text[1:]).expanduser().read_text(encoding="utf-8")
    return text.replace("\\n", "\n")


CLICKS = {"approve": APPROVE_ACTION_ID, "deny": DENY_ACTION_ID}
NATIVE_STOP = "click stop"
"""The line that clicks Slack's own Stop of the thread's agent session (while processing)."""
"""The lines that click a button of the latest approval request, and the button."""


async def _click(
    fake: FakeSlackApi,
    channel: IncidentChannel,
    you: Person,
    action_id: str,
    thread_ts: str,
    say: Callable[[str], None],
) -> None:
    """Click ``action_id`` on the bot's latest message in the thread that has it."""
    for message in reversed(fake.state.messages.get(CHANNEL, [])):
        button = _button(message, action_id)
        if message.get("thread_ts") == thread_ts and button is not None:
            await channel.click(
                you,
                action_id=action_id,
                value=str(button.get("value", "")),
                message_ts=str(message["ts"]),
                thread_ts=thread_ts,
            )
            return
    say("no approval request waits in the thread: nothing to click")


def _button(message: dict[str, Any], action_id: str) -> dict[str, Any] | None:
    """The button ``action_id`` in ``message``'s blocks, or None."""
    for block in message.get("blocks") or []:
        for element in block.get("elements") or () if isinstance(block, dict) else ():
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return element
    return None


async def _native_stop(
    fake: FakeSlackApi,
    channel: IncidentChannel,
    you: Person,
    thread_ts: str,
    say: Callable[[str], None],
) -> None:
    """Click the native Stop: Slack stops the streams and sends ``agent_session_stopped``."""
    try:
        event = fake.agents.click_stop(CHANNEL, thread_ts, you.user_id)
    except ValueError as exc:
        say(str(exc))
        return
    await channel.event(event)


def agent_lines(fake: FakeSlackApi, seen: dict[str, str]) -> list[str]:
    """What changed in the agent sessions and streamed messages of ``#incident`` since
    ``seen`` (updated), in the order Slack made the changes (``AgentSurfaceState.changes``):
    a session's status and title, each task's title and status, the plan's title and the
    streamed text, each stream's end (its tasks still running then shown stopped), as
    Slack shows them."""
    lines: list[str] = []
    changes = fake.agents.changes
    start = int(seen.get("n", "0"))
    seen["n"] = str(len(changes))
    for change in changes[start:]:
        if change.channel == CHANNEL:
            lines.extend(_change_lines(fake, change, seen))
    return lines


def _change_lines(fake: FakeSlackApi, change: Change, seen: dict[str, str]) -> list[str]:
    if change.kind == "status":
        session = fake.agents.session(change.channel, change.thread_ts)
        title = session.title if session is not None else ""
        shown = f"agent session: {change.what} · {title}"
        if seen.get(f"s:{change.thread_ts}") == shown:
            return []
        seen[f"s:{change.thread_ts}"] = shown
        stop = " (Stop shown: type 'click stop')" if change.what == "processing" else ""
        return [shown + stop]
    if change.kind == "chunk":
        line = _chunk_line(change.chunk)
        key = f"c:{change.stream_ts}:{line}"
        if not line or key in seen:
            return []
        seen[key] = line
        return [line]
    stream = fake.agents.streams.get(change.stream_ts)
    unfinished = [
        _unfinished_line(str(task.get("title")))
        for task in (stream.tasks().values() if stream is not None else ())
        if task.get("status") in ("in_progress", "pending")
    ]
    ended = f"  (stream {change.what.replace('_', ' ')})"
    if not unfinished and seen.get(f"e:{change.thread_ts}") == ended:
        return []  # a person's Stop ends the thread's streams at once: said once
    seen[f"e:{change.thread_ts}"] = ended
    return [*unfinished, ended]


def _unfinished_line(title: str) -> str:
    """A task its stream ended on: one waiting for a person's approval waits on (the
    request with its buttons follows); any other was stopped."""
    if title.startswith(WAITING_PREFIX):
        return f"  {WAITING_MARK} {title}"
    return f"  {STOPPED_MARK} {title} — stopped"


_TASK_MARKS = {"pending": "○", "in_progress": "◐", "complete": "●", "error": "✗"}
STOPPED_MARK = "■"
"""A task its stream ended on while it still ran or waited (a Stop, an expiry)."""
WAITING_MARK = "⏸"
"""A task its stream ended on while it waited for a person's approval."""
WAITING_PREFIX = "Waiting for approval"
"""How the product titles a call waiting for approval (``stream_chunks.approval_chunk``)."""


def _chunk_line(chunk: dict[str, Any]) -> str:
    kind = chunk.get("type")
    if kind == "task_update":
        mark = _TASK_MARKS.get(str(chunk.get("status")), "?")
        lines = [line.strip() for line in str(chunk.get("output") or "").splitlines()]
        output = " · ".join([line for line in lines if line][:2])  # its time, then its output
        return f"  {mark} {chunk.get('title')}" + (f" — {output}" if output else "")
    if kind == "plan_update":
        return f"  plan: {chunk.get('title')}"
    if kind == "markdown_text":
        text = " ".join(str(chunk.get("text", "")).split())
        return f"  {text}" if text else ""
    return ""


async def watch_channel(fake: FakeSlackApi, say: Callable[[str], None]) -> None:
    """Print each message the bot posts in ``#incident`` (and each edit of one), each reply
    only you see (ephemeral, or to a command's ``response_url``) and each modal it opens
    or updates,
    until cancelled; the agent sessions and streamed steps first (``agent_lines``), a
    streamed message itself once it carries the answer's blocks."""
    shown: dict[str, str] = {}
    agents: dict[str, str] = {}
    ephemerals = len(fake.state.ephemerals)
    views = {view_id: view["hash"] for view_id, view in fake.state.views.items()}
    while True:
        for line in agent_lines(fake, agents):
            say(f"warroom {line}" if not line.startswith(" ") else line)
        for message in list(fake.state.messages.get(CHANNEL, [])):
            if message.get("user") == BOT_USER_ID or message.get("bot_id") == BOT_ID:
                ts, text = str(message["ts"]), render_message(message)
                if ts in fake.agents.streams and not message.get("blocks"):
                    continue  # a streamed message: ``agent_lines`` shows its steps
                if shown.get(ts) != text:
                    say(_as_said(f"warroom{' (edited)' if ts in shown else ''}", text))
                    shown[ts] = text
        for ephemeral in fake.state.ephemerals[ephemerals:]:
            say(_as_said("warroom (only you)", render_message(ephemeral)))
        ephemerals = len(fake.state.ephemerals)
        for view_id, view in list(fake.state.views.items()):
            if views.get(view_id) != view["hash"]:
                say(_describe_view(view, updated=view_id in views))
                views[view_id] = view["hash"]
        await asyncio.sleep(WATCH_S)


def _as_said(who: str, text: str) -> str:
    """``who: `` and the message's first line, its other lines indented under it."""
    first, *rest = text.split("\n") or [""]
    return "\n".join([f"{who}: {first}", *(f"    {line}" for line in rest)])


def _describe_view(view: dict[str, Any], *, updated: bool = False) -> str:
    """A modal the app opened, or ``updated`` (views.update replaced it): its title, what
    it says, each input (block id, label, initial value) and what can be typed."""
    title = (view.get("title") or {}).get("text", "")
    if not _inputs(view):
        how = "type 'close'" if view.get("submit") is None else "type 'submit' or 'close'"
    else:
        how = "type 'set BLOCK TEXT', then 'submit' or 'close'"
    lines = [f"modal {'updated' if updated else 'opened'}: {title} ({how})"]
    for block in view.get("blocks") or ():
        if block.get("type") == "input":
            label = (block.get("label") or {}).get("text", "")
            value = str((block.get("element") or {}).get("initial_value") or "")
            shown = value if len(value) <= 60 else value[:59] + "…"
            lines.append(f"  {block['block_id']}: {label} = {shown!r}")
        elif block.get("type") in ("section", "context") and block.get("text"):
            lines.append(f"  {str(block['text'].get('text', ''))[:100]}")
    return "\n".join(lines)
