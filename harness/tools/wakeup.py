"""ScheduleWakeup: resume this session later with a prompt (Claude Code 2.1.332's
``delaySeconds``, ``reason``, ``prompt``; docs/tools.md).

The call only records the wake-up in the checkpoint (``ScheduledWakeup``); when the turn
ends, the durable layer parks the session with it as the wait's ``wake_at``
(``harness.next_wake``), so the wait is a database state: no worker, sandbox or delayed
message is held, and a deploy or a worker restart loses nothing. At the time the
sweeper records the prompt as an input of kind ``wake`` and the session runs again. One
wake-up is pending at a time: a new call replaces the last. ``stop`` cancels it (a
stopped session is never woken).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from harness.loop.checkpoint import ScheduledWakeup
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome

MAX_DELAY_S = 3600.0


class ScheduleWakeupInput(BaseModel):
    """ScheduleWakeup's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    delay_seconds: float | None = Field(default=None, alias="delaySeconds", allow_inf_nan=False)
    """Any finite number: out of range (negative too) it is moved into range."""
    reason: str = Field(default="", max_length=500)
    prompt: str | None = Field(default=None, min_length=1, max_length=20_000)
    stop: bool = False
    """Cancel the pending wake-up instead (Claude Code's ``stop``)."""
    noop: bool = False
    """Schedule nothing, change nothing (Claude Code's ``noop``)."""


def clamp_delay_s(delay_s: float, min_delay_s: float) -> float:
    """``delay_s`` within ``[min_delay_s, MAX_DELAY_S]``.

    >>> clamp_delay_s(5, 60), clamp_delay_s(90, 60), clamp_delay_s(7200, 60)
    (60, 90, 3600.0)
    """
    return min(max(delay_s, min_delay_s), MAX_DELAY_S)


END_THE_TURN = (
    "If you owe the user a status update this tick, write it now as ordinary response "
    "text; then end the turn \u2014 the harness re-invokes you when the wakeup fires or a "
    "task-notification arrives."
)
"""What follows a scheduled wake-up (Claude Code 2.1.336's sentence, captured)."""
_OUTCOME = (
    "If you armed a Monitor for this loop, TaskStop it now. Then write the loop's outcome "
    "for the user as ordinary visible response text \u2014 and end the turn."
)
STOPPED_PENDING = (
    "Loop stopped \u2014 cancelled 1 pending wakeup(s); no further dynamic-loop wakeups "
    f"scheduled. {_OUTCOME}"
)
"""``stop`` with a wake-up pending (Claude Code 2.1.336, captured)."""
STOPPED_NONE = (
    "Loop stopped \u2014 any dynamic loop in this session is ended; there was no pending "
    "wakeup to cancel. If you are running a fixed-interval /loop (a recurring cron), it is "
    f"NOT stopped by this call \u2014 cancel it with CronDelete. {_OUTCOME}"
)
"""``stop`` with nothing pending (Claude Code 2.1.336, captured)."""


def scheduled_text(due_at: float, delay_s: float, requested_s: float) -> str:
    """The result of a scheduled wake-up: its time (UTC, as ``HH:MM:SS``), the delay in
    whole seconds and, when the requested delay was moved into range, the bound it was
    clamped to (Claude Code 2.1.336's words).

    >>> print(scheduled_text(3600 * 2 + 60, 60, 5))  # doctest: +ELLIPSIS
    Next wakeup scheduled for 02:01:00 (in 60s) (clamped to 60s from your requested value). If ...
    """
    when = datetime.fromtimestamp(due_at, UTC).strftime("%H:%M:%S")
    clamped = (
        f" (clamped to {delay_s:g}s from your requested value)" if delay_s != requested_s else ""
    )
    return f"Next wakeup scheduled for {when} (in {round(delay_s)}s){clamped}. {END_THE_TURN}"


async def schedule_wakeup(p: ScheduleWakeupInput, ctx: ToolContext) -> ToolOutcome:
    """Record the wake-up (replacing a pending one) and say when it fires; ``stop``
    cancels the pending one. The errors and texts are Claude Code 2.1.336's (captured):
    ``delaySeconds`` and ``reason`` are checked first, then ``prompt``, and ``noop``
    needs them too."""
    if p.stop:
        text = STOPPED_PENDING if ctx.wakeup_pending else STOPPED_NONE
        return ToolOutcome(text, cancel_wakeup=True)
    if p.delay_seconds is None or not p.reason.strip():
        return ToolOutcome(
            "`delaySeconds` and `reason` are required when `stop` is not true.", is_error=True
        )
    if p.prompt is None:
        return ToolOutcome("`prompt` is required when `stop` is not true.", is_error=True)
    if p.noop:
        return ToolOutcome("Nothing scheduled; a pending wakeup, if any, is unchanged.")
    delay_s = clamp_delay_s(p.delay_seconds, ctx.min_wakeup_s)
    due_at = time.time() + delay_s
    text = scheduled_text(due_at, delay_s, p.delay_seconds)
    wakeup = ScheduledWakeup(due_at, " ".join(p.reason.split()), p.prompt)
    return ToolOutcome(text, wakeup=wakeup)


SCHEDULE_WAKEUP = ModelTool(
    name="ScheduleWakeup",
    description=(
        "Resume this session later: after delaySeconds (60 to 3600) the prompt is given "
        "back to you as a new message and you continue from there. Use it to check again on "
        "something slow (a rollout, an error rate, a CI run) without holding anything while "
        "you wait: end your turn after scheduling. One wake-up is pending at a time; "
        "scheduling again replaces it. reason is a few words shown to the team; prompt "
        "should say everything you will need to pick up the work."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "delaySeconds": {
                "type": "number",
                "description": "Seconds from now (60 to 3600; other values are moved into range).",
            },
            "reason": {
                "type": "string",
                "description": "Why you will check again, in a few words (shown to the team).",
            },
            "prompt": {
                "type": "string",
                "description": "The message you will be resumed with.",
            },
            "stop": {
                "type": "boolean",
                "description": "Cancel the pending wakeup instead of scheduling one.",
            },
            "noop": {"type": "boolean", "description": "Schedule nothing this time."},
        },
        "required": [],
        "additionalProperties": False,
    },
    params=ScheduleWakeupInput,
    runner=schedule_wakeup,
)
