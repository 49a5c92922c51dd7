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
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, tool_error

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


async def schedule_wakeup(p: ScheduleWakeupInput, ctx: ToolContext) -> ToolOutcome:
    """Record the wake-up (replacing a pending one) and say when it fires; ``stop``
    cancels the pending one."""
    if p.stop:
        return ToolOutcome("Stopped: no wakeup is scheduled now.", cancel_wakeup=True)
    if p.noop:
        return ToolOutcome("Nothing scheduled; a pending wakeup, if any, is unchanged.")
    if p.delay_seconds is None or p.prompt is None:
        missing = "delaySeconds" if p.delay_seconds is None else "prompt"
        return tool_error(f"The required parameter `{missing}` is missing (unless stop is true)")
    delay_s = clamp_delay_s(p.delay_seconds, ctx.min_wakeup_s)
    due_at = time.time() + delay_s
    when = datetime.fromtimestamp(due_at, UTC).strftime("%H:%M:%S")
    text = f"Next wakeup scheduled for {when} UTC (in {round(delay_s)} seconds)."
    if delay_s != p.delay_seconds:
        text += (
            f" The delay was moved into the allowed range of {ctx.min_wakeup_s:g}-"
            f"{MAX_DELAY_S:g} seconds."
        )
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
