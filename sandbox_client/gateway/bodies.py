"""Request bodies held by the gateway: one budget over all its connections.

The gateway reads a request's whole body before deciding (a method override may hide in
it), up to ``GatewayOptions.max_request_bytes`` each. Without a bound over connections, a
sandbox that opens many and leaves each body unfinished would make the gateway's process
(a worker's, with every session it runs) hold gigabytes. Everything here runs on the
gateway's event loop: no lock.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BodyBudget:
    """At most ``limit_bytes`` of request bodies held at once; ``held_bytes`` now."""

    limit_bytes: int
    held_bytes: int = 0

    def hold(self) -> BodyHold:
        """A hold for one request's body, empty; ``release`` it when the request is done."""
        return BodyHold(self)


@dataclass
class BodyHold:
    """The bytes of one request's body taken from a ``BodyBudget``."""

    budget: BodyBudget
    taken_bytes: int = 0

    def take(self, size_bytes: int) -> bool:
        """Take ``size_bytes`` more; False (nothing taken) when the budget has no room."""
        budget = self.budget
        if budget.held_bytes + size_bytes > budget.limit_bytes:
            return False
        budget.held_bytes += size_bytes
        self.taken_bytes += size_bytes
        return True

    def release(self) -> None:
        """Give back everything taken (idempotent)."""
        self.budget.held_bytes -= self.taken_bytes
        self.taken_bytes = 0
