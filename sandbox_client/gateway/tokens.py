"""The token listener's memory of session tokens, and its bound on their look-ups.

A remote sandbox names its session by a token in each request; the token is looked up
(``TokenResolver``: the database) and the answer remembered for ``ttl_s``, so a busy
sandbox costs no query per connection and a revoked token stops working within
``ttl_s``. What it protects against is a neighbour behind the same address (NAT) that
sends whole requests with guessed tokens without end, each guess a query:

- a token carries a tag under the deployment's key (``CallCredentials.signed_token``),
  so a made-up one is refused without a look-up, and one the deployment issued is
  looked up at once: only a live session's sandbox holds one;
- a token without a tag (issued before tokens had one, until those sessions end) is
  looked up under a bound per client (``max_per_client`` in flight), past which it is
  answered 503 at once (``TokensBusy``), unless it was live when last looked up;
- a token answered recently is answered from memory. Live tokens are few (one per
  session) and kept apart from refused ones, so guesses cannot push them out
  (``max_remembered`` each).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sandbox_client.gateway.calls import LEGACY_TOKEN_CHARS, CallCredentials

if TYPE_CHECKING:
    from sandbox_client.gateway.proxy import Caller, TokenResolver


class TokensBusy(Exception):
    """A client already has as many token look-ups in flight as it may (answer 503)."""


@dataclass(frozen=True)
class _Known:
    at: float  # when it was looked up (monotonic s)
    caller: Caller


class TokenBook:
    """Tokens → their sessions, remembered, with look-ups bounded and shared.

    Args:
        resolve: looks a token up, as the sandbox sent it (None: unknown or revoked).
        ttl_s: how long an answer is used, from when its look-up began (the most a
            revoked token keeps working).
        max_remembered: live tokens remembered, and as many refused ones (oldest first).
        max_per_client: look-ups in flight per client key (``Gateway``'s: an address,
            or an IPv6 /64) of untagged tokens not live when last looked up.
        max_in_flight: look-ups in flight of all clients, whatever their tokens.
        signer: the deployment's key (tokens carry its tag); None: no token has a tag,
            each is looked up under the bound.
        clock: monotonic seconds.

    Concurrent requests naming one token share one look-up.
    """

    def __init__(
        self,
        resolve: TokenResolver,
        *,
        ttl_s: float = 5.0,
        max_remembered: int = 4096,
        max_per_client: int = 16,
        max_in_flight: int = 256,
        signer: CallCredentials | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._resolve = resolve
        self._signer = signer
        self.ttl_s = ttl_s
        self.max_remembered = max_remembered
        self.max_per_client = max_per_client
        self.max_in_flight = max_in_flight
        self._clock = clock
        self._live: dict[str, _Known] = {}  # oldest look-up first
        self._refused: dict[str, float] = {}  # token → when its look-up began, oldest first
        self._pending: dict[str, asyncio.Future[Caller | None]] = {}  # token → its look-up
        self._in_flight: dict[str, int] = {}  # client key → bounded look-ups not answered

    def in_flight(self, client: str | None = None) -> int:
        """Look-ups not yet answered: of ``client`` under its bound, or of all."""
        return len(self._pending) if client is None else self._in_flight.get(client, 0)

    async def caller(self, token: str, client: str) -> Caller | None:
        """The session ``token`` names (None: unknown or revoked), for a request of
        ``client``.

        Raises:
            TokensBusy: it must be looked up and ``client`` has ``max_per_client`` (an
                untagged token not live before) or all have ``max_in_flight`` look-ups
                in flight.
            Whatever ``resolve`` raises.
        """
        now = self._clock()
        known = self._live.get(token)
        if known is not None and now - known.at <= self.ttl_s:
            return known.caller
        refused_at = self._refused.get(token)
        if refused_at is not None and now - refused_at <= self.ttl_s:
            return None
        pending = self._pending.get(token)
        if pending is None:
            tagged = False
            if self._signer is not None:
                tagged = self._signer.token_is_ours(token)
                if not tagged and len(token) != LEGACY_TOKEN_CHARS:
                    return None  # made up: never issued in any form
            bounded = not tagged and known is None
            if len(self._pending) >= self.max_in_flight or (
                bounded and self._in_flight.get(client, 0) >= self.max_per_client
            ):
                raise TokensBusy(client)
            pending = self._start(token, client if bounded else None, now)
        return await asyncio.shield(pending)  # a request gone leaves the look-up to others

    def _start(self, token: str, client: str | None, began: float) -> asyncio.Future[Caller | None]:
        """Start ``token``'s look-up (counted under ``client``'s bound, if any)."""
        if client is not None:
            self._in_flight[client] = self._in_flight.get(client, 0) + 1

        async def look_up() -> Caller | None:
            try:
                return self._remember(token, await self._resolve(token), began)
            finally:
                del self._pending[token]
                if client is not None:
                    left = self._in_flight[client] - 1
                    if left:
                        self._in_flight[client] = left
                    else:
                        del self._in_flight[client]

        task = asyncio.ensure_future(look_up())
        task.add_done_callback(_retrieved)
        self._pending[token] = task
        return task

    def _remember(self, token: str, caller: Caller | None, began: float) -> Caller | None:
        """Keep ``token``'s answer from a look-up begun at ``began``, unless a newer one
        is kept (a look-up from before a revocation cannot undo its refusal)."""
        live, refused_at = self._live.get(token), self._refused.get(token)
        if (live is not None and live.at > began) or (
            refused_at is not None and refused_at > began
        ):
            return caller
        self._live.pop(token, None)
        self._refused.pop(token, None)
        now = self._clock()
        if caller is not None:
            self._live[token] = _Known(began, caller)
            while len(self._live) > self.max_remembered:
                del self._live[next(iter(self._live))]
        else:
            self._refused[token] = began
            while self._refused and (
                len(self._refused) > self.max_remembered
                or now - next(iter(self._refused.values())) > self.ttl_s
            ):
                del self._refused[next(iter(self._refused))]
        return caller


def _retrieved(task: asyncio.Future[Caller | None]) -> None:
    """Mark a look-up's error seen: every request waiting on it may be gone."""
    if not task.cancelled():
        task.exception()
