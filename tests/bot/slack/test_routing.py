"""``route``: what each kind of message does to its thread, as a table of decisions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bot.slack.inbound import InboundMessage, MessageKind
from bot.slack.routing import (
    EDITED_PREFIX,
    Ignore,
    Remember,
    Route,
    Start,
    Steer,
    Stop,
    Usage,
    route,
)
from memory_store import Session, SessionKey, SessionStatus, TokenUsage

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SESSION = Session(
    id="s1",
    key=SessionKey("T1", "C1", "100.0"),
    requester_id="U1",
    status=SessionStatus.WAITING,
    epoch=1,
    lease_owner=None,
    lease_until=None,
    pending_token=None,
    crash_count=0,
    wait_until=None,
    checkpoint="{}",
    sandbox=None,
    last_seq=0,
    inbox_seq=1,
    inbox_consumed=1,
    usage=TokenUsage(),
    created_at=NOW,
    updated_at=NOW,
)
REPLY = InboundMessage(
    event_id="Ev1",
    org_id="T1",
    channel_id="C1",
    ts="101.0",
    thread_ts="100.0",
    event_ts="101.0",
    user_id="U2",
    text="check the pool",
    mentions_bot=False,
    from_bot=False,
    kind=MessageKind.POSTED,
)
TOP_MENTION = replace(REPLY, ts="100.0", thread_ts=None, event_ts="100.0", mentions_bot=True)


@pytest.mark.parametrize(
    ("message", "session", "strict", "expected"),
    [
        (TOP_MENTION, None, False, Start(with_context=False)),
        (replace(REPLY, mentions_bot=True), None, False, Start(with_context=True)),
        (replace(TOP_MENTION, text=""), None, False, Usage()),
        (replace(TOP_MENTION, text="stop"), None, False, Usage()),
        (REPLY, SESSION, False, Steer("s1", "check the pool")),
        (REPLY, SESSION, True, Ignore("strict channel")),
        (replace(REPLY, mentions_bot=True), SESSION, True, Steer("s1", "check the pool")),
        (replace(REPLY, text="Stop!"), SESSION, True, Stop("s1")),
        (replace(REPLY, text="stop", mentions_bot=True), SESSION, False, Stop("s1")),
        (replace(REPLY, text="stop the deploy"), SESSION, False, Steer("s1", "stop the deploy")),
        (REPLY, None, False, Remember()),
        (REPLY, None, True, Ignore("no session")),
        (replace(REPLY, from_bot=True), SESSION, False, Ignore("bot")),
        (replace(REPLY, kind=MessageKind.DELETED), SESSION, False, Ignore("deleted")),
        (replace(REPLY, kind=MessageKind.OTHER), SESSION, False, Ignore("other")),
        (
            replace(REPLY, kind=MessageKind.EDITED),
            SESSION,
            False,
            Steer("s1", EDITED_PREFIX + "check the pool"),
        ),
        (replace(REPLY, kind=MessageKind.EDITED), SESSION, True, Ignore("strict channel")),
        (replace(REPLY, kind=MessageKind.EDITED), None, False, Ignore("edit outside a session")),
    ],
    ids=[
        "top-level mention starts",
        "mention in a plain thread starts with its history",
        "bare mention gets usage",
        "stop with nothing running gets usage",
        "reply in a session thread steers",
        "strict channel ignores a reply without mention",
        "strict channel takes a mention",
        "stop works in a strict channel",
        "mention plus stop stops",
        "a sentence starting with stop steers",
        "reply outside a session is remembered for a later mention",
        "reply outside a session in a strict channel is ignored",
        "bot message is ignored",
        "deletion is ignored",
        "join or unfurl is ignored",
        "edit steers, marked as an edit",
        "edit without mention in a strict channel is ignored",
        "edit outside a session is ignored",
    ],
)
def test_route_decides_what_a_message_does_to_its_thread(
    message: InboundMessage, session: Session | None, strict: bool, expected: Route
) -> None:
    assert route(message, session, strict=strict) == expected
