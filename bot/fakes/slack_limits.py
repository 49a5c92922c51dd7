"""Slack's per-workspace Web API rate limits, as the fake Slack API enforces them.

Slack limits each method per workspace and app by *tier* (docs.slack.dev, "Rate
limits"): Tier 1 ≥ 1 request/min, Tier 2 ≥ 20/min, Tier 3 ≥ 50/min, Tier 4 ≥ 100/min,
with bursts allowed; ``chat.postMessage`` is "special": about one message per second
per channel. Over the limit Slack answers HTTP 429, ``{"ok": false, "error":
"ratelimited"}`` and ``Retry-After`` (whole seconds). The fake counts requests in a
sliding window (60 s by default; tests may shorten it to keep the same ratio of
requests to time) and answers the same way.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["METHOD_TIERS", "TIER_PER_MINUTE", "RateLimits"]

TIER_PER_MINUTE = {1: 1, 2: 20, 3: 50, 4: 100}
"""Requests per minute per workspace, by tier (Slack's floor for each tier)."""

METHOD_TIERS: Mapping[str, int] = {
    # docs.slack.dev method reference, "Rate limits" of each method
    "agents.sessions.setStatus": 3,
    "auth.test": 4,
    "chat.appendStream": 4,
    "chat.startStream": 2,
    "chat.stopStream": 2,
    "chat.update": 3,
    "chat.delete": 3,
    "chat.postEphemeral": 4,
    "conversations.replies": 3,
    "conversations.history": 3,
    "files.getUploadURLExternal": 4,
    "files.completeUploadExternal": 4,
    "files.info": 4,
    "reactions.add": 3,
    "users.info": 4,
    "usergroups.users.list": 2,
    "views.open": 4,
    "views.update": 4,
    "views.push": 4,
}
POST_MESSAGE_PER_CHANNEL_PER_MINUTE = 60  # "1 per second per channel, short bursts allowed"


@dataclass
class RateLimits:
    """Sliding-window counters per ``(workspace, method[, channel])``.

    Args:
        clock: monotonic seconds.
        window_s: the window that the per-minute limits apply to (60 s in Slack).
    """

    clock: Callable[[], float]
    window_s: float = 60.0
    enabled: bool = True
    _seen: dict[tuple[str, ...], deque[float]] = field(default_factory=dict)

    def admit(self, team_id: str, method: str, channel: str | None) -> int | None:
        """Count one request; returns None if within the limit, else ``Retry-After`` seconds
        (the request is then not counted: Slack did not serve it)."""
        limit, key = self._limit(team_id, method, channel)
        if not self.enabled or limit is None:
            return None
        now = self.clock()
        seen = self._seen.setdefault(key, deque())
        while seen and seen[0] <= now - self.window_s:
            seen.popleft()
        if len(seen) >= limit:
            return max(1, math.ceil(seen[0] + self.window_s - now))
        seen.append(now)
        return None

    def _limit(
        self, team_id: str, method: str, channel: str | None
    ) -> tuple[int | None, tuple[str, ...]]:
        if method == "chat.postMessage":
            return POST_MESSAGE_PER_CHANNEL_PER_MINUTE, (team_id, method, channel or "")
        tier = METHOD_TIERS.get(method)
        return (TIER_PER_MINUTE[tier] if tier else None), (team_id, method)
