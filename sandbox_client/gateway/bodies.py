"""Request bodies held by the gateway: one budget over all its connections, and a share of
it per session.

The gateway reads a request's whole body before deciding (a method override may hide in
it), up to ``GatewayOptions.max_request_bytes`` each. Without a bound over connections, a
sandbox that opens many and leaves each body unfinished would make the gateway's process
(a worker's, with every session it runs) hold gigabytes; without a share per session, one
sandbox could spend the whole budget and leave the others' requests refused. Everything
here runs on the gateway's event loop: no lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BodyBudget:
    """At most ``limit_bytes`` of request bodies held at once, and at most
    ``session_limit_bytes`` of them by one session; ``held_bytes`` now."""

    limit_bytes: int
    session_limit_bytes: int
    held_bytes: int = 0
    _by_session: dict[str, int] = field(default_factory=dict)

    def hold(self, session_id: str) -> BodyHold:
        """A hold for one request's body from ``session_id``'s sandbox, empty;
        ``release`` it when the request is done."""
        return BodyHold(self, session_id)

    def held_by(self, session_id: str) -> int:
        """The bytes ``session_id``'s requests hold now."""
        return self._by_session.get(session_id, 0)

    def _take(self, session_id: str, size_bytes: int) -> bool:
        mine = self._by_session.get(session_id, 0)
        if mine + size_bytes > self.session_limit_bytes:
            return False
        if self.held_bytes + size_bytes > self.limit_bytes:
            return False
        self._by_session[session_id] = mine + size_bytes
        self.held_bytes += size_bytes
        return True

    def _give(self, session_id: str, size_bytes: int) -> None:
        left = self._by_session.get(session_id, 0) - size_bytes
        if left > 0:
            self._by_session[session_id] = left
        else:
            self._by_session.pop(session_id, None)
        self.held_bytes -= size_bytes


@dataclass
class BodyHold:
    """The bytes of one request's body taken from a ``BodyBudget``."""

    budget: BodyBudget
    session_id: str
    taken_bytes: int = 0

    def take(self, size_bytes: int) -> bool:
        """Take ``size_bytes`` more; False (nothing taken) when the budget, or the
        session's share of it, has no room."""
        if not self.budget._take(self.session_id, size_bytes):
            return False
        self.taken_bytes += size_bytes
        return True

    def release(self) -> None:
        """Give back everything taken (idempotent)."""
        self.budget._give(self.session_id, self.taken_bytes)
        self.taken_bytes = 0
