"""CronCreate / CronList / CronDelete at the tool level, over a real (SQLite) store:
an expression checked and its job recorded, listed and deleted; bad, too frequent
and too many are tool errors that record nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness import ToolContext, run_tool
from harness.tools.cron import MAX_CRON_JOBS
from memory_store import CronJobs, Database, FileStore
from tests.harness.tool_support import JailWorkspace

SESSION = "s-cron"


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[ToolContext]:
    db = Database.from_url(None, data_dir=tmp_path / "db")
    await db.migrate()
    (tmp_path / "ws").mkdir()
    try:
        yield ToolContext(
            store=FileStore(db),
            workspace=JailWorkspace(tmp_path / "ws"),
            org_id="T-CRON",
            channel_id="C1",
            session_id=SESSION,
            actor="agent",
            tool_use_id="toolu_cron_1",
            cron=CronJobs(db),
        )
    finally:
        await db.dispose()


def _error(text: str) -> str:
    assert text.startswith("<tool_use_error>"), text
    return text.removeprefix("<tool_use_error>").removesuffix("</tool_use_error>")


async def test_a_job_is_created_listed_and_deleted_by_its_id(ctx: ToolContext) -> None:
    made = await run_tool(
        "CronCreate", {"cron": "*/15  * * * *", "prompt": "Re-check the error rate."}, ctx
    )
    assert not made.is_error, made.content
    assert ctx.cron is not None
    [job] = await ctx.cron.list(SESSION)
    assert job.cron == "*/15 * * * *"
    assert job.recurring is True
    assert job.next_due_at.minute % 15 == 0
    assert job.next_due_at > datetime.now(UTC)
    at = job.next_due_at
    when = (
        f"{at:%b} {at.day} {(at.hour % 12) or 12}:{at.minute:02d}{'am' if at.hour < 12 else 'pm'}"
    )
    # Claude Code 2.1.336's sentences (captured), with where Warroom keeps the job
    assert made.content == (
        f"Scheduled recurring job {job.job_id} (Every 15 minutes). Next run: {when}. "
        "Persisted in Warroom's database: it survives restarts and deploys, and ends with "
        "this session. Use CronDelete to cancel sooner."
    )
    listed = await run_tool("CronList", {}, ctx)
    assert listed.content == (
        f"{job.job_id} — Every 15 minutes (recurring), next run {when}: Re-check the error rate."
    )
    deleted = await run_tool("CronDelete", {"id": job.job_id}, ctx)
    assert deleted.content == f"Cancelled job {job.job_id}."
    assert (await run_tool("CronList", {}, ctx)).content == "No scheduled jobs."
    again = await run_tool("CronDelete", {"id": job.job_id}, ctx)
    assert _error(again.content) == f"No scheduled job with id '{job.job_id}'"


async def test_a_retried_call_makes_one_job_and_a_one_shot_says_so(ctx: ToolContext) -> None:
    call = {"cron": "30 14 * * *", "prompt": "Look at the rollout.", "recurring": False}
    first = await run_tool("CronCreate", call, ctx)
    second = await run_tool("CronCreate", call, ctx)  # the same tool_use_id, run again
    assert first.content == second.content
    assert first.content.startswith("Scheduled one-shot task ")
    assert "(Every day at 2:30 PM)" in first.content
    assert first.content.endswith("It will fire once then auto-delete.")
    assert ctx.cron is not None
    assert len(await ctx.cron.list(SESSION)) == 1


@pytest.mark.parametrize(
    ("cron", "error"),
    [
        ("*/15 * * *", "Invalid cron expression '*/15 * * *'. Expected 5 fields: M H DoM Mon DoW."),
        ("61 * * * *", "Invalid cron expression '61 * * * *'"),
        ("every 15 minutes", "Invalid cron expression 'every 15 minutes'"),
        ("0 0 31 2 *", "Cron expression '0 0 31 2 *' never fires"),
        ("* * * * * */5", "Invalid cron expression '* * * * * */5'. Expected 5"),
    ],
)
async def test_a_bad_expression_is_an_error_that_records_nothing(
    ctx: ToolContext, cron: str, error: str
) -> None:
    outcome = await run_tool("CronCreate", {"cron": cron, "prompt": "p"}, ctx)
    assert _error(outcome.content).startswith(error)
    assert ctx.cron is not None
    assert await ctx.cron.list(SESSION) == []


async def test_firings_closer_than_the_minimum_are_refused_unless_seconds_mode(
    ctx: ToolContext,
) -> None:
    slow = replace(ctx, min_wakeup_s=300)
    outcome = await run_tool("CronCreate", {"cron": "* * * * *", "prompt": "p"}, slow)
    assert _error(outcome.content) == (
        "Cron expression '* * * * *' fires every 60 seconds; "
        "the shortest interval allowed is 300 seconds"
    )
    fast = replace(ctx, min_wakeup_s=1, cron_seconds=True)
    made = await run_tool("CronCreate", {"cron": "* * * * * */2", "prompt": "p"}, fast)
    assert not made.is_error, made.content


async def test_the_number_of_jobs_is_capped(ctx: ToolContext) -> None:
    for n in range(MAX_CRON_JOBS):
        one = replace(ctx, tool_use_id=f"toolu_{n}")
        assert not (
            await run_tool("CronCreate", {"cron": "0 * * * *", "prompt": "p"}, one)
        ).is_error
    over = replace(ctx, tool_use_id="toolu_over")
    outcome = await run_tool("CronCreate", {"cron": "0 * * * *", "prompt": "p"}, over)
    assert _error(outcome.content) == (
        f"Too many scheduled jobs (at most {MAX_CRON_JOBS}); delete one with CronDelete first"
    )


async def test_without_a_store_the_tools_say_they_are_unavailable(ctx: ToolContext) -> None:
    bare = replace(ctx, cron=None)
    for name, call in (("CronCreate", {"cron": "0 * * * *", "prompt": "p"}), ("CronList", {})):
        assert _error((await run_tool(name, call, bare)).content).startswith(
            "Scheduled jobs are not available here"
        )
