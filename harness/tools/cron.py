"""CronCreate / CronList / CronDelete: recurring wake-ups of this session (Claude Code
2.1.332's parameters: ``cron``, ``prompt``, ``recurring``, ``durable``; ``id``).

A job is a row (``memory_store.cron``), not a process: between firings the session
waits holding nothing. At each due time the sweeper wakes the waiting session with the
job's prompt as an input (as a ``ScheduleWakeup`` does) and stores the next due time in
the same transaction, so a due time fires once even across worker crashes. Every job is
durable (``durable`` is accepted and changes nothing). Expressions are 5 fields in the
server's local time, UTC; two firings at least ``min_wakeup_s`` apart (a minute by
default); at most ``MAX_CRON_JOBS`` per session. ``stop`` and the session's end delete
its jobs. The result texts are Claude Code 2.1.336's (captured), except that a Warroom job
is kept in the database, not in a file, and does not expire (it ends with its session or a
CronDelete); docs/tools.md.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, tool_error
from harness.tools.cron_words import describe, next_run
from memory_store.cron.schedule import CronExpressionError, check
from memory_store.cron.store import CronJob, CronLimitReached, job_id_for

MAX_CRON_JOBS = 20
"""Jobs one session may have at once."""


class CronCreateInput(BaseModel):
    """CronCreate's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cron: str = Field(min_length=1, max_length=200)
    prompt: str = Field(min_length=1, max_length=20_000)
    recurring: bool = True
    durable: bool = True
    """Accepted for Claude Code's sake: every Warroom job is durable."""


class CronListInput(BaseModel):
    """CronList's parameters (none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CronDeleteInput(BaseModel):
    """CronDelete's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1, max_length=64)


_UNAVAILABLE = "Scheduled jobs are not available here (a subagent, or no database)."


KEPT = (
    "Persisted in Warroom's database: it survives restarts and deploys, and ends with this session."
)
"""Where Claude Code says where a job is kept ("Persisted to .claude/scheduled_tasks.json")."""


def _kind(job: CronJob) -> str:
    return "recurring" if job.recurring else "one-shot"


def created_text(job: CronJob) -> str:
    """CronCreate's result (Claude Code 2.1.336's sentences, with Warroom's ``KEPT``)."""
    head = "recurring job" if job.recurring else "one-shot task"
    text = f"Scheduled {head} {job.job_id} ({describe(job.cron)}). Next run: "
    text += f"{next_run(job.next_due_at)}. {KEPT} "
    if job.recurring:
        return text + "Use CronDelete to cancel sooner."
    return text + "It will fire once then auto-delete."


def listed_line(job: CronJob) -> str:
    """One CronList line (Claude Code 2.1.336's; a durable job has no ``[session-only]``)."""
    when = next_run(job.next_due_at)
    return f"{job.job_id} \u2014 {describe(job.cron)} ({_kind(job)}), next run {when}: {job.prompt}"


async def cron_create(p: CronCreateInput, ctx: ToolContext) -> ToolOutcome:
    """Record a job (its id derived from the call's ``tool_use_id``) and say when it
    first runs; a bad or too frequent expression, or too many jobs, is a tool error."""
    if ctx.cron is None:
        return tool_error(_UNAVAILABLE)
    now = datetime.fromtimestamp(time.time(), UTC)
    try:
        expr = await asyncio.to_thread(  # up to ~20 ms of croniter for a yearly expression
            check, p.cron, now=now, min_interval_s=ctx.min_wakeup_s, seconds=ctx.cron_seconds
        )
    except CronExpressionError as e:
        return tool_error(str(e))
    try:
        job = await ctx.cron.create(
            ctx.session_id,
            job_id_for(ctx.tool_use_id),
            cron=expr,
            prompt=p.prompt,
            recurring=p.recurring,
            max_jobs=MAX_CRON_JOBS,
        )
    except CronLimitReached:
        return tool_error(
            f"Too many scheduled jobs (at most {MAX_CRON_JOBS}); delete one with CronDelete first"
        )
    return ToolOutcome(created_text(job))


async def cron_list(p: CronListInput, ctx: ToolContext) -> ToolOutcome:
    """The session's jobs, one a line: id, expression, kind, next run, prompt."""
    if ctx.cron is None:
        return tool_error(_UNAVAILABLE)
    jobs = await ctx.cron.list(ctx.session_id)
    if not jobs:
        return ToolOutcome("No scheduled jobs.")
    return ToolOutcome("\n".join(listed_line(j) for j in jobs))


async def cron_delete(p: CronDeleteInput, ctx: ToolContext) -> ToolOutcome:
    """Delete one of the session's jobs; an unknown id is a tool error."""
    if ctx.cron is None:
        return tool_error(_UNAVAILABLE)
    if not await ctx.cron.delete(ctx.session_id, p.id):
        return tool_error(f"No scheduled job with id '{p.id}'")
    return ToolOutcome(f"Cancelled job {p.id}.")


CRON_CREATE = ModelTool(
    name="CronCreate",
    description=(
        "Schedule a prompt to be given back to you on a cron schedule: a standard 5-field "
        'expression (minute hour day-of-month month day-of-week) in UTC, e.g. "*/15 * * * *" '
        "for every 15 minutes. Each time it fires you are resumed with the prompt as a new "
        "message; nothing is held in between, so end your turn after scheduling. recurring "
        "(default true) false runs it once. Firings are at least a minute apart. Returns the "
        "job id (for CronDelete). stop in the thread cancels every job."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "cron": {"type": "string", "description": "5-field cron expression, in UTC."},
            "prompt": {
                "type": "string",
                "description": "The message you will be resumed with each time it fires.",
            },
            "recurring": {
                "type": "boolean",
                "description": "true (default): every time it matches; false: once.",
            },
            "durable": {
                "type": "boolean",
                "description": "Accepted; every job survives restarts.",
            },
        },
        "required": ["cron", "prompt"],
        "additionalProperties": False,
    },
    params=CronCreateInput,
    runner=cron_create,
)

CRON_LIST = ModelTool(
    name="CronList",
    description=(
        "List this session's scheduled jobs (made with CronCreate): each one's id, cron "
        "expression, whether it recurs, its next run time and its prompt."
    ),
    input_schema={
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    },
    params=CronListInput,
    runner=cron_list,
)

CRON_DELETE = ModelTool(
    name="CronDelete",
    description=(
        "Cancel one of this session's scheduled jobs by the id CronCreate returned "
        "(CronList shows them). It will not fire again."
    ),
    input_schema={
        "type": "object",
        "properties": {"id": {"type": "string", "description": "The job id."}},
        "required": ["id"],
        "additionalProperties": False,
    },
    params=CronDeleteInput,
    runner=cron_delete,
)
