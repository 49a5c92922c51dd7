"""``/agent egress``: the last requests a session made through the egress gateway (§11).

Slack does not run slash commands inside threads, so the command names its session another
way: with no argument it is the channel's most recently active session; with a link to a
thread (Slack's "Copy link", of the root or of a reply) or a thread's ``ts``, that thread's
session. Only threads of the channel the command was typed in are shown: the command's
reply reaches whoever typed it, and this keeps a private channel's requests in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.slack.render import escape_mrkdwn, sections_from_lines, truncate
from bot.slack.skills.command import SkillsCommand, SkillsCommands
from memory_store import EgressEntry, EgressLog, Session, SessionKey, SessionStore

MAX_LISTED = 20
MAX_PATH_CHARS = 80
USAGE = (
    "`/agent egress` lists the last requests this channel's latest session made through the "
    "egress gateway; `/agent egress <link to a thread>` those of that thread's session."
)
_LINK = re.compile(r"/archives/(?P<channel>[A-Z0-9]+)/p(?P<seconds>\d{10})(?P<micros>\d{6})")
_THREAD_TS = re.compile(r"[?&]thread_ts=(?P<ts>\d{10}\.\d{6})")
_TS = re.compile(r"\d{10}\.\d{6}")


@dataclass(frozen=True)
class ThreadRef:
    """A thread named in the command: its root ``ts``, and its channel when a link gave it."""

    thread_ts: str
    channel_id: str | None = None


def thread_of(text: str) -> ThreadRef | None:
    """The thread a link or a ``ts`` names (None: neither). A reply's link names its thread.

    >>> thread_of("https://acme.slack.com/archives/C0INC/p1764511320000100")
    ThreadRef(thread_ts='1764511320.000100', channel_id='C0INC')
    >>> thread_of("<https://acme.slack.com/archives/C0INC/p1764511399000200"
    ...           "?thread_ts=1764511320.000100&cid=C0INC>").thread_ts
    '1764511320.000100'
    >>> thread_of("1764511320.000100"), thread_of("yesterday")
    (ThreadRef(thread_ts='1764511320.000100', channel_id=None), None)
    """
    text = text.strip("<>").split("|", 1)[0]
    if _TS.fullmatch(text):
        return ThreadRef(text)
    link = _LINK.search(text)
    if link is None:
        return None
    parent = _THREAD_TS.search(text)
    ts = parent["ts"] if parent else f"{link['seconds']}.{link['micros']}"
    return ThreadRef(ts, link["channel"])


def entry_line(entry: EgressEntry) -> str:
    """One request as the listing shows it: time (UTC), method, host, path, status, outcome,
    rule.

    >>> from datetime import UTC, datetime
    >>> print(entry_line(EgressEntry("s", "t", datetime(2026, 11, 30, 14, 2, 7, tzinfo=UTC),
    ...     "GET", "prom.internal", 443, "/api/v1/query?query", 200, 12, 3.1, "prom", "injected")))
    `11-30 14:02:07` GET `prom.internal:443/api/v1/query?query` → 200 · injected · rule prom
    """
    where = f"{entry.host or '?'}:{entry.port}{truncate(entry.path, MAX_PATH_CHARS)}"
    rule = f"rule {entry.rule}" if entry.rule else "no rule"
    return (
        f"`{entry.at:%m-%d %H:%M:%S}` {entry.method} `{escape_mrkdwn(where)}` → "
        f"{entry.status} · {entry.outcome} · {escape_mrkdwn(rule)}"
    )


class EgressCommands:
    """The ``/agent egress`` handler, replying through the skills commands' ``tell``."""

    def __init__(self, skills: SkillsCommands, sessions: SessionStore, log: EgressLog) -> None:
        self._skills = skills
        self._sessions = sessions
        self._log = log

    async def handle(self, command: SkillsCommand) -> None:
        """Answer one ``/agent egress [thread]`` command (``command.words`` start with
        ``egress``).

        Raises:
            DatabaseUnavailable: the database could not be read.
            SlackCallFailed, SlackUnreachable: the reply could not be sent.
        """
        words = command.words[1:] if command.words[:1] == ("egress",) else command.words
        if len(words) > 1:
            await self._skills.tell(command, USAGE)
            return
        session, problem = await self._session(command, words[0] if words else None)
        if session is None:
            await self._skills.tell(command, problem)
            return
        entries = await self._log.recent(session.id, limit=MAX_LISTED)
        head = (
            f"*Egress of <@{session.requester_id}>'s session* "
            f"(thread {session.key.thread_ts}; the last {len(entries)}, times in UTC):"
        )
        if not entries:
            head = f"<@{session.requester_id}>'s session (thread {session.key.thread_ts}) has "
            head += "made no request through the egress gateway."
        lines = [head, *(entry_line(e) for e in entries)]
        await self._skills.tell(command, "\n".join(lines), sections_from_lines(lines))

    async def _session(
        self, command: SkillsCommand, named: str | None
    ) -> tuple[Session | None, str]:
        """The session the command names, or None and why."""
        if named is None:
            latest = await self._sessions.latest(command.org_id, command.channel_id)
            return latest, "No Warroom session has run in this channel yet."
        thread = thread_of(named)
        if thread is None:
            return None, f"`{escape_mrkdwn(truncate(named, 100))}` is not a thread link. {USAGE}"
        if thread.channel_id not in (None, command.channel_id):
            return None, "That thread is in another channel: run `/agent egress` there."
        key = SessionKey(command.org_id, command.channel_id, thread.thread_ts)
        return await self._sessions.find(key), "No Warroom session ran in that thread."
