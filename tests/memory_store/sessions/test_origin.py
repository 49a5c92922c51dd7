"""Sessions keep to their origin: a worker takes only sessions it can serve, a chat only its
own (issue #12, item 7)."""

from __future__ import annotations

from memory_store import SessionOrigin, SessionStore
from tests.memory_store.session_support import ManualClock, new_key

LEASE_S = 5.0


async def _open(store: SessionStore, origin: SessionOrigin) -> tuple[str, str]:
    opened = await store.open_or_join(
        new_key(),
        requester_id="U1",
        initial_checkpoint="{}",
        text="hi",
        source_ts="1.1",
        origin=origin,
    )
    assert opened.token is not None
    return opened.session_id, opened.token


async def test_a_session_is_claimed_only_by_a_worker_of_its_origin(store: SessionStore) -> None:
    slack_id, slack_token = await _open(store, SessionOrigin.SLACK)
    chat_id, chat_token = await _open(store, SessionOrigin.CHAT)

    chat_takes_slack = await store.claim(
        slack_id, slack_token, worker_id="chat", lease_s=LEASE_S, origin=SessionOrigin.CHAT
    )
    slack_takes_chat = await store.claim(
        chat_id, chat_token, worker_id="bot", lease_s=LEASE_S, origin=SessionOrigin.SLACK
    )

    assert chat_takes_slack is None
    assert slack_takes_chat is None
    session = await store.get(chat_id)
    assert session is not None
    assert (session.origin, session.epoch) == (SessionOrigin.CHAT, 0)


async def test_a_scoped_sweep_hands_out_only_its_own_sessions(
    store: SessionStore, clock: ManualClock
) -> None:
    # Given runnable sessions of both origins whose wake-ups were lost
    slack_id, _ = await _open(store, SessionOrigin.SLACK)
    mine, _ = await _open(store, SessionOrigin.CHAT)
    other_chat, _ = await _open(store, SessionOrigin.CHAT)
    clock.advance(61)

    # When a chat sweeps for its own session, and a Slack worker sweeps for Slack's
    chat = await store.sweep(
        max_crashes=3, stale_after_s=60, origin=SessionOrigin.CHAT, session_ids={mine}
    )
    slack = await store.sweep(max_crashes=3, stale_after_s=60, origin=SessionOrigin.SLACK)

    # Then each gets only what it may run
    assert mine in {w.session_id for w in chat.requeue}
    assert not {slack_id, other_chat} & {w.session_id for w in chat.requeue}
    assert slack_id in {w.session_id for w in slack.requeue}
    assert not {mine, other_chat} & {w.session_id for w in slack.requeue}
