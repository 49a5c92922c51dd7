"""``TokenBook`` when a look-up takes longer than ``ttl_s`` and refuses (red team 3): every
request waiting on it gets None (a 407), not an error, although the answer, dated from when
its look-up began, is already older than ``ttl_s``."""

from __future__ import annotations

import asyncio

from sandbox_client.gateway.tokens import TokenBook

from .test_tokens import CALLS, LIVE_RAW


async def test_a_refusal_slower_than_the_ttl_is_a_refusal_not_an_error() -> None:
    # Given a book (ttl 5 s) whose look-up of a (revoked) token takes 6 s
    now = [0.0]

    async def slow_unknown(token: str) -> None:
        now[0] += 6.0
        return None

    book = TokenBook(slow_unknown, ttl_s=5, signer=CALLS, clock=lambda: now[0])
    # When a request names a token the deployment issued (tagged: looked up at once)
    answer = await asyncio.wait_for(book.caller(CALLS.signed_token(LIVE_RAW), "a"), 5)
    # Then it is refused (None), and the book holds nothing in flight
    assert answer is None
    assert book.in_flight() == 0
