"""The token listener's memory of tokens (``TokenBook``): answers kept a while and bounded,
look-ups of tokens never live bounded per client, tokens that were live never held up."""

from __future__ import annotations

import asyncio

import pytest

from sandbox_client.gateway import Caller
from sandbox_client.gateway.tokens import TokenBook, TokensBusy

GOOD = Caller("S1", "C1")


class Resolver:
    """A token table counting its look-ups; ``hold`` makes guesses wait."""

    def __init__(self) -> None:
        self.looked_up: list[str] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.entered: asyncio.Queue[str] = asyncio.Queue()  # each token as its look-up starts

    async def __call__(self, token: str) -> Caller | None:
        self.looked_up.append(token)
        self.entered.put_nowait(token)
        if token == "good":
            return GOOD
        await self.hold.wait()
        return None


async def test_answers_are_remembered_a_while_and_bounded() -> None:
    # Given a book keeping 100 answers of each kind for 5 s
    resolver, now = Resolver(), [0.0]
    book = TokenBook(resolver, ttl_s=5, max_remembered=100, clock=lambda: now[0])
    # When a sandbox uses its token again and again, and somebody guesses many more
    assert await book.caller("good", "a") == GOOD
    assert await book.caller("good", "a") == GOOD
    for guess in range(110):
        assert await book.caller(f"guess-{guess}", "b") is None
    # Then the good token was looked up once, the guesses once each, and a guess is still
    # remembered while the oldest past the bound are forgotten
    assert resolver.looked_up.count("good") == 1
    assert len(resolver.looked_up) == 111
    assert await book.caller("guess-109", "b") is None
    assert await book.caller("guess-0", "b") is None
    assert resolver.looked_up.count("guess-109") == 1
    assert resolver.looked_up.count("guess-0") == 2
    # And the guesses did not push the good token out: it is still answered from memory
    assert await book.caller("good", "a") == GOOD
    assert resolver.looked_up.count("good") == 1
    # And every answer is looked up again once its time is over
    now[0] += 5.1
    assert await book.caller("good", "a") == GOOD
    assert await book.caller("guess-109", "b") is None
    assert resolver.looked_up.count("good") == 2
    assert resolver.looked_up.count("guess-109") == 2


async def test_look_ups_of_tokens_never_live_are_bounded_per_client() -> None:
    # Given a book allowing two look-ups in flight per client, over a slow table
    resolver = Resolver()
    book = TokenBook(resolver, max_per_client=2)
    assert await book.caller("good", "a") == GOOD  # a sandbox at client "a", once
    resolver.hold.clear()
    # When client "a" has two guesses waiting on their look-ups
    resolver.entered = asyncio.Queue()
    held = [asyncio.ensure_future(book.caller(f"guess-{n}", "a")) for n in range(2)]
    for _ in held:
        await asyncio.wait_for(resolver.entered.get(), 5)
    assert book.in_flight("a") == 2
    # Then a third guess of "a" is refused at once, another client's is looked up, and
    # the sandbox's token, live before, is answered (from memory)
    with pytest.raises(TokensBusy):
        await book.caller("guess-3", "a")
    other = asyncio.ensure_future(book.caller("guess-4", "b"))
    assert await book.caller("good", "a") == GOOD
    resolver.hold.set()
    assert await asyncio.gather(*held, other) == [None, None, None]
    assert book.in_flight("a") == 0


async def test_a_token_live_before_is_looked_up_again_outside_the_bound() -> None:
    # Given a book allowing one look-up in flight per client, whose good token's answer
    # has grown old, and a guess of the same client waiting on its look-up
    resolver, now = Resolver(), [0.0]
    book = TokenBook(resolver, ttl_s=5, max_per_client=1, clock=lambda: now[0])
    assert await book.caller("good", "a") == GOOD
    now[0] += 6
    resolver.hold.clear()
    resolver.entered = asyncio.Queue()
    guess = asyncio.ensure_future(book.caller("guess", "a"))
    assert await asyncio.wait_for(resolver.entered.get(), 5) == "guess"
    # When the sandbox uses its token
    # Then it is looked up again, not refused
    assert await book.caller("good", "a") == GOOD
    assert resolver.looked_up.count("good") == 2
    resolver.hold.set()
    assert await guess is None


async def test_a_revoked_token_stops_working_once_its_answer_is_old() -> None:
    # Given a book keeping answers 5 s, and a token that is revoked after its first use
    revoked = False

    async def resolve(token: str) -> Caller | None:
        return None if revoked else GOOD

    now = [0.0]
    book = TokenBook(resolve, ttl_s=5, clock=lambda: now[0])
    assert await book.caller("t", "a") == GOOD
    revoked = True
    # When it is used within the answer's time, and after it
    within = await book.caller("t", "a")
    now[0] += 5.1
    after = await book.caller("t", "a")
    # Then it works until then, and no longer
    assert (within, after) == (GOOD, None)
