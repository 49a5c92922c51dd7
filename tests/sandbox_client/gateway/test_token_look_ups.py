"""Red team 2 of the token listener's ``TokenBook``: a revoked token works no longer than
``token_ttl_s`` after a look-up that saw it live, and no token is a path of look-ups
without bound (tokens once live, tagged tokens): requests naming one token share one."""

from __future__ import annotations

import asyncio

import pytest

from sandbox_client.gateway import Caller
from sandbox_client.gateway.tokens import TokenBook

from .test_tokens import CALLS, LIVE_RAW

GOOD = Caller("s-remote", "C-INC")
TAGGED = CALLS.signed_token(LIVE_RAW)


class Table:
    """The session-token table: ``revoked`` flips it; each look-up waits for ``gate``
    (a loaded database) and answers what the table held when the look-up *started*."""

    def __init__(self) -> None:
        self.revoked = False
        self.gate = asyncio.Event()
        self.gate.set()
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls = 0
        self.started = asyncio.Event()  # a look-up is in flight

    async def __call__(self, token: str) -> Caller | None:
        self.calls += 1
        answer = GOOD if token in (LIVE_RAW, TAGGED) and not self.revoked else None
        self.in_flight += 1
        self.started.set()
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
        finally:
            self.in_flight -= 1
        return answer


async def test_a_revoked_token_stops_working_within_the_ttl_of_the_look_up_that_saw_it_live() -> (
    None
):
    # Given a book (ttl 5 s) and a look-up of a live token that reads the table at t=0,
    # then waits on a loaded database
    now = [0.0]
    table = Table()
    book = TokenBook(table, ttl_s=5, signer=CALLS, clock=lambda: now[0])
    slow_gate = asyncio.Event()
    table.gate = slow_gate
    slow = asyncio.create_task(book.caller(TAGGED, "a"))
    await asyncio.wait_for(table.started.wait(), 5)
    # When the session ends (token revoked), another request comes meanwhile (it shares
    # the look-up in flight: one query), and the stale "live" answer arrives at t=1
    table.revoked = True
    joined = asyncio.create_task(book.caller(TAGGED, "b"))
    now[0] = 1.0
    slow_gate.set()
    assert list(await asyncio.wait_for(asyncio.gather(slow, joined), 5)) == [GOOD, GOOD]
    assert table.calls == 1
    # Then 5.5 s after that look-up began the token no longer works (a revoked token
    # works at most ``token_ttl_s`` after a look-up that saw it live began)
    table.gate = asyncio.Event()
    table.gate.set()
    now[0] = 5.5
    assert await asyncio.wait_for(book.caller(TAGGED, "c"), 5) is None


async def _most_in_flight(table: Table, book: TokenBook, token: str) -> int:
    """Send 500 requests naming ``token`` at once while the table is slow; the most
    look-ups it had in flight."""
    table.most_in_flight = 0
    tries = [asyncio.create_task(book.caller(token, "a")) for _ in range(500)]
    await asyncio.wait_for(table.started.wait(), 5)
    await asyncio.sleep(0)  # every request has asked (each task's first step has run)
    table.gate.set()
    await asyncio.gather(*tries, return_exceptions=True)
    return table.most_in_flight


async def test_a_token_once_live_is_not_an_unbounded_path_of_look_ups() -> None:
    # Given a book bounding look-ups to 16 per client, and a legacy (untagged) token that
    # was live when last looked up and has since been revoked (its session ended)
    now = [0.0]
    table = Table()
    book = TokenBook(table, ttl_s=5, max_per_client=16, signer=CALLS, clock=lambda: now[0])
    assert await book.caller(LIVE_RAW, "a") == GOOD
    table.revoked = True
    now[0] = 6.0  # its answer's time is over
    table.gate.clear()  # the database is slow
    # When its holder (the ended session's sandbox) sends 500 requests at once
    most = await _most_in_flight(table, book, LIVE_RAW)
    # Then one look-up is in flight: they are all of one token, and share it
    assert most == 1


async def test_a_revoked_tagged_token_is_not_an_unbounded_path_of_look_ups() -> None:
    # Given a book bounding look-ups to 16 per client, and a session token with the
    # deployment's tag whose session has ended (the sandbox, compromised, keeps it)
    table = Table()
    table.revoked = True
    book = TokenBook(table, ttl_s=5, max_per_client=16, signer=CALLS)
    table.gate.clear()  # the database is slow (or made slow by this very flood)
    # When it sends 500 requests with that token at once (every 5 s, once the refusal
    # is forgotten)
    most = await _most_in_flight(table, book, TAGGED)
    # Then the gateway runs one query, not 500: the same token's look-ups are joined (a
    # tagged token skips the client's bound, not that)
    assert most == 1


@pytest.mark.xfail(
    strict=True,
    reason="red team: an untagged token (only commands started before the upgrade still "
    "hold one: a worker of this release gives every later command a tagged token) is "
    "looked up under its client's bound, which a neighbour's guesses of that shape keep "
    "full; such a command is answered 503 until the flood stops",
)
async def test_a_neighbour_guessing_legacy_tokens_does_not_keep_a_legacy_sandbox_out() -> None:
    # Given a gateway just restarted for the upgrade that brings tags (nothing remembered),
    # and a neighbour behind the same NAT with 16 guesses of a legacy token's shape in
    # flight (as test_token_flood's neighbour keeps, a query each)
    table = Table()
    book = TokenBook(table, ttl_s=5, max_per_client=16, signer=CALLS)
    table.gate.clear()
    guesses = [
        asyncio.create_task(book.caller(f"guess-{n:02d}" + "g" * 35, "address 203.0.113.7"))
        for n in range(16)
    ]
    for _ in range(3):
        await asyncio.sleep(0)
    # When a sandbox of a session that began before the upgrade (its token untagged)
    # makes its first request from behind that address
    try:
        mine = asyncio.create_task(book.caller(LIVE_RAW, "address 203.0.113.7"))
        for _ in range(3):
            await asyncio.sleep(0)
        table.gate.set()
        # Then it is let in (a neighbour behind the same NAT cannot keep a sandbox out)
        assert await mine == GOOD
    finally:
        table.gate.set()
        await asyncio.gather(*guesses, return_exceptions=True)
