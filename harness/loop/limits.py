"""Limits of one session, as one value passed down from settings."""

from __future__ import annotations

from dataclasses import dataclass

from harness.cost.caps import Spent
from harness.cost.pricing import nanousd, usd
from harness.errors import (
    OrgDayCostLimitReached,
    SessionCostLimitReached,
    StepLimitReached,
    TokenLimitReached,
    ToolTimeLimitReached,
)
from harness.loop.checkpoint import Checkpoint
from harness.loop.services import Service
from harness.model.catalog import DEFAULT_MAX_TOKENS


@dataclass(frozen=True)
class Limits:
    """Per-session limits.

    Attributes:
        max_steps: model calls + tool calls before the session must answer.
        max_session_tokens: total model tokens (all kinds) before it must answer.
        max_tool_time_s: wall time, in seconds, spent running tools (summed over the
            session) before it must answer.
        max_tokens: ``max_tokens`` of one model call (thinking included).
        max_input_chars: characters of one user message given to the model; the rest is
            cut and the user told (a pasted megabyte must not poison the session).
        compact_at_tokens: prompt size (input + cache tokens of the last call) that
            triggers compaction; Claude models take 200k tokens of context.
        loop_repeats: the same call with the same input this many times in a row earns a note.
        bash_max_timeout_ms: Claude Code's Bash maximum (600000).
        agent_may_write_skills: whether the model's Write/Edit may change /skills
            (``WARROOM_AGENT_WRITES_SKILLS``); humans edit skills by default.
        max_session_cost_usd: USD the session may spend in all (None: no cap); unlike the
            limits above it does not restart with each turn: raise it to continue.
        max_org_day_cost_usd: USD the org may spend per UTC day (None: no cap).
        services: the systems a sandbox reaches through the egress gateway (from the
            rules' ``base_url``s): the bounds of what a session can query, told to the
            model in the system prompt (``prompt.system_prompt``).
        min_wakeup_s: the shortest ``ScheduleWakeup`` delay, in seconds (Claude Code: 60;
            ``WARROOM_MIN_WAKEUP_S``); longer than an hour is lowered to an hour. Also the
            shortest interval between two firings of a cron job (``CronCreate``).
        cron_seconds: accept 6-field cron expressions (seconds last): a test-only mode
            (``WARROOM_CRON_SECONDS``) so tests need not wait minutes.
    """

    max_steps: int = 200
    max_session_tokens: int = 5_000_000
    max_tool_time_s: float = 3600.0
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_input_chars: int = 100_000
    compact_at_tokens: int = 150_000
    loop_repeats: int = 3
    bash_max_timeout_ms: int = 600_000
    agent_may_write_skills: bool = False
    max_session_cost_usd: float | None = None
    max_org_day_cost_usd: float | None = None
    services: tuple[Service, ...] = ()
    min_wakeup_s: float = 60.0
    cron_seconds: bool = False

    def has_cost_caps(self) -> bool:
        """Whether a spending cap is set (then ``enforce`` needs ``Spent``)."""
        return self.max_session_cost_usd is not None or self.max_org_day_cost_usd is not None

    def enforce(self, cp: Checkpoint, spent: Spent | None = None) -> None:
        """Raise when ``cp`` has used up a limit; return when another step may run.

        Limits count from the start of the current turn (``cp.turn_base``): a reply
        after a best-effort answer starts with a fresh budget. Spending caps count the
        session's (and the org's day's) whole spend, ``spent`` (None: not checked).

        Raises:
            StepLimitReached: steps this turn ≥ ``max_steps``.
            TokenLimitReached: tokens this turn ≥ ``max_session_tokens``.
            ToolTimeLimitReached: tool seconds this turn ≥ ``max_tool_time_s``.
            SessionCostLimitReached: the session spent ≥ ``max_session_cost_usd``.
            OrgDayCostLimitReached: the org spent ≥ ``max_org_day_cost_usd`` today (UTC).
        """
        if spent is not None:
            self._enforce_caps(spent)
        base_steps, base_tokens, base_tool_s = cp.turn_base
        steps, tokens = cp.steps - base_steps, cp.usage.total() - base_tokens
        tool_s = cp.tool_time_s - base_tool_s
        if steps >= self.max_steps:
            raise StepLimitReached(used=steps, limit=self.max_steps)
        if tokens >= self.max_session_tokens:
            raise TokenLimitReached(used=tokens, limit=self.max_session_tokens)
        if tool_s >= self.max_tool_time_s:
            raise ToolTimeLimitReached(used=round(tool_s, 3), limit=self.max_tool_time_s)

    def _enforce_caps(self, spent: Spent) -> None:
        session_cap, org_cap = self.max_session_cost_usd, self.max_org_day_cost_usd
        if session_cap is not None and spent.session_nanousd >= nanousd(session_cap):
            used = float(usd(spent.session_nanousd))
            raise SessionCostLimitReached(used=used, limit=session_cap)
        if org_cap is not None and spent.org_day_nanousd >= nanousd(org_cap):
            raise OrgDayCostLimitReached(used=float(usd(spent.org_day_nanousd)), limit=org_cap)
