"""What one inbound message means for its thread: a decision, as a value (docs/architecture.md §9).

``route`` is pure: given the message, the thread's session (if any) and whether its
channel is in strict-mention mode, it says start, steer, stop, answer with usage, or
ignore. The rules:

- bots (ours or others), deletions, joins, unfurls and the like are ignored;
- an @mention with nothing else (or ``stop`` where nothing runs) gets the usage;
  ``stop`` (alone, or after the mention) in a session thread stops it;
- an @mention starts a session on its thread when there is none — a mention inside an
  existing thread also takes the thread's earlier messages as context;
- in a session thread, a mention or (unless the channel is strict) any human reply or
  edit steers it; outside a session thread only mentions start anything, but a human
  reply there is remembered for a while (``Remember``): Slack may deliver it before the
  mention that opens the thread's session (a retried mention, issue #32), and that
  session must still read it;
- a Slack Connect user from another org starts nothing unless ``external_may_start``;
  their replies steer, marked as from an external user.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.slack.inbound import InboundMessage, MessageKind
from bot.slack.text import is_stop
from memory_store import Session

EDITED_PREFIX = "(edited) "
EXTERNAL_PREFIX = "(from an external Slack Connect user, not a member of this org) "


@dataclass(frozen=True)
class Ignore:
    """Do nothing (``reason`` is for logs and tests)."""

    reason: str


@dataclass(frozen=True)
class Usage:
    """Answer in the thread with how to use the bot."""


@dataclass(frozen=True)
class Start:
    """Open a session on the message's thread; ``with_context``: the thread already
    had messages before the mention, give them to the session."""

    with_context: bool


@dataclass(frozen=True)
class Steer:
    """Give ``text`` to the thread's session (the model sees it at its next step)."""

    session_id: str
    text: str


@dataclass(frozen=True)
class Remember:
    """A human reply in a thread that has no session (yet): note that the thread has
    replies, so a session a mention opens there later reads them from the thread."""


@dataclass(frozen=True)
class Stop:
    """Cancel the thread's session."""

    session_id: str


Route = Ignore | Usage | Start | Steer | Stop | Remember


def route(
    message: InboundMessage,
    session: Session | None,
    *,
    strict: bool,
    external_may_start: bool = False,
) -> Route:
    """Decide what ``message`` does to its thread, whose session is ``session`` (or None).

    >>> from bot.slack.inbound import InboundMessage, MessageKind
    >>> m = InboundMessage("Ev1", "T1", "C1", "1.0", None, "1.0", "U1", "pods are down",
    ...                    True, False, MessageKind.POSTED)
    >>> route(m, None, strict=False)
    Start(with_context=False)
    """
    if message.from_bot:
        return Ignore("bot")
    if message.kind in (MessageKind.DELETED, MessageKind.OTHER):
        return Ignore(message.kind.value)
    if message.external and session is None and not external_may_start:
        return Ignore("external user")
    decided = _decide(message, session, strict=strict)
    if message.external and isinstance(decided, Steer):
        return Steer(decided.session_id, EXTERNAL_PREFIX + decided.text)
    return decided


def _decide(message: InboundMessage, session: Session | None, *, strict: bool) -> Route:
    if message.kind is MessageKind.EDITED:
        return _edit(message, session, strict=strict)
    if message.mentions_bot:
        return _mention(message, session)
    if session is None:
        if strict or not message.in_thread or message.kind is not MessageKind.POSTED:
            return Ignore("no session")
        return Remember()
    if is_stop(message.text):
        return Stop(session.id)
    if strict:
        return Ignore("strict channel")
    return Steer(session.id, message.text) if message.text else Ignore("empty")


def _mention(message: InboundMessage, session: Session | None) -> Route:
    if not message.text:
        return Usage()
    if is_stop(message.text):
        return Usage() if session is None else Stop(session.id)
    if session is None:
        return Start(with_context=message.in_thread)
    return Steer(session.id, message.text)


def _edit(message: InboundMessage, session: Session | None, *, strict: bool) -> Route:
    if session is None:
        if message.mentions_bot:  # an edit that added the mention starts, like a mention
            return _mention(message, session)
        return Ignore("edit outside a session")
    if strict and not message.mentions_bot:
        return Ignore("strict channel")
    if not message.text:
        return Ignore("empty")
    return Steer(session.id, EDITED_PREFIX + message.text)
