"""The chat.update budget shared by every worker process of a deployment, through Redis."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from bot.slack.budget import SharedCallBudget

pytestmark = pytest.mark.redis


async def test_two_processes_budgets_share_one_window(redis_url: str) -> None:
    # Given two workers' budgets for one workspace: 3 updates a minute between them
    key = f"chat.update:test-{uuid.uuid4().hex[:8]}"
    first = SharedCallBudget(redis_url, key, calls=3, window_s=60)
    second = SharedCallBudget(redis_url, key, calls=3, window_s=60)
    try:
        # When the first takes two turns and the second one
        await first.take()
        await first.take()
        await second.take()
        # Then the window is full for both: a fourth turn waits, wherever it is asked
        for budget in (first, second):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(budget.take(), 0.5)
    finally:
        await first.aclose()
        await second.aclose()


async def test_another_workspace_has_its_own_window(redis_url: str) -> None:
    one = SharedCallBudget(redis_url, f"chat.update:a-{uuid.uuid4().hex[:8]}", calls=1)
    other = SharedCallBudget(redis_url, f"chat.update:b-{uuid.uuid4().hex[:8]}", calls=1)
    try:
        await one.take()
        await asyncio.wait_for(other.take(), 5)  # not held up by the first workspace
    finally:
        await one.aclose()
        await other.aclose()


async def test_workers_with_redis_share_the_budget_by_default_and_alone_keep_their_own(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.durable.wiring import update_budget
    from bot.settings import Settings

    def settings(redis: str | None) -> Settings:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1-2-abc")
        if redis:
            monkeypatch.setenv("REDIS_URL", redis)
        else:
            monkeypatch.delenv("REDIS_URL", raising=False)
        return Settings(_env_file=None)  # type: ignore[call-arg]

    shared = update_budget(settings(redis_url))
    assert isinstance(shared, SharedCallBudget)
    await shared.aclose()
    assert not isinstance(update_budget(settings(None)), SharedCallBudget)
    monkeypatch.setenv("WARROOM_SLACK_SHARED_BUDGET", "false")
    assert not isinstance(update_budget(settings(redis_url)), SharedCallBudget)


async def test_a_window_redis_lost_starts_nearly_full_not_empty(redis_url: str) -> None:
    key = f"chat.update:restart-{uuid.uuid4().hex[:8]}"
    budget = SharedCallBudget(redis_url, key, calls=3, window_s=0.5, after_reset_calls=1)
    try:
        # Given a window never seen before: its history is unknown, one turn is granted
        assert await budget.try_take() == 0.0
        assert await budget.try_take() > 0
        # And once that window has passed, a known window grants its three turns
        await asyncio.wait_for(budget.take(), 10)  # a deadline, not a timing assertion
        assert [await budget.try_take() for _ in range(2)] == [0.0, 0.0]
        assert await budget.try_take() > 0
        # When Redis restarts and forgets every key (Slack still counts the last window)
        await budget._redis.flushdb()
        # Then only the after-reset turn is granted, not a whole new window
        assert await budget.try_take() == 0.0
        assert await budget.try_take() > 0
    finally:
        await budget.aclose()


async def test_a_workspace_known_to_be_new_starts_with_an_empty_window(redis_url: str) -> None:
    # Given a workspace no process posted for (the drill's fake one), known to be new
    key = f"chat.update:new-{uuid.uuid4().hex[:8]}"
    budget = SharedCallBudget(redis_url, key, calls=3, window_s=60, after_reset_calls=1)
    try:
        await budget.known_empty()
        # Then its first window grants every turn, not only the after-reset one
        assert [await budget.try_take() for _ in range(3)] == [0.0, 0.0, 0.0]
        assert await budget.try_take() > 0
    finally:
        await budget._redis.delete(f"warroom:budget:{key}", f"warroom:budget:{key}:known")
        await budget.aclose()
