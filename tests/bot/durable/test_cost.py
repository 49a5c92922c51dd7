"""Cost (§14) through the real driver, PostgreSQL and the fake Messages API: every
answered call is in the ledger once, priced; the spending caps stop a session at the cap
and not before, with an answer that names the cap; raising the cap and replying continues."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from bot.fakes.anthropic_api import FakeAnthropicAPI, Fault, RecordedRequest, Reply
from harness import DEFAULT_MODEL, Limits, default_prices
from tests.bot.durable.cost_support import (
    Metered,
    close_metered,
    crash_once_at,
    open_metered,
    served_cost_nanousd,
    served_usage,
)

pytestmark = pytest.mark.postgres

TODOS = {"todos": [{"content": "Check pods", "status": "in_progress", "activeForm": "Checking"}]}
DONE = {"todos": [{"content": "Check pods", "status": "completed", "activeForm": "Checking"}]}
FINISH = "please finish"


def busy(request: RecordedRequest) -> Reply:
    """Keep working (TodoWrite) until someone asks to finish."""
    if FINISH in json.dumps(request.messages[-1]):
        return Reply.text("The pool shrank at 14:02; that is the cause.")
    return Reply.tool("TodoWrite", TODOS)


@pytest.fixture
async def fake_busy() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI(busy) as fake:
        yield fake


async def _metered(postgres_url: str, fake: FakeAnthropicAPI, tmp_path: Path) -> Metered:
    return await open_metered(postgres_url, fake.base_url, tmp_path)


async def test_the_ledger_counts_each_answered_call_once_through_a_retry_and_a_crash(
    postgres_url: str, tmp_path: Path
) -> None:
    # Given an API that is overloaded once, then answers: a todo list, another, a text
    script: list[Reply | Fault] = [
        Fault.status(529),
        Reply.tool("TodoWrite", TODOS),
        Reply.tool("TodoWrite", DONE),
        Reply.tool("TodoWrite", DONE),  # the same step again, after the crash
        Reply.text("Done: the pool shrank."),
    ]
    async with FakeAnthropicAPI(script) as fake:
        metered = await _metered(postgres_url, fake, tmp_path)
        try:
            # and a worker that dies after the second model call answered, before its commit
            driver = metered.driver(crash=crash_once_at("after_model", step=2))
            await metered.open("s-crash")
            before = _metric("warroom_model_calls_total", model=DEFAULT_MODEL, priced="true")
            cost_before = _metric("warroom_model_cost_usd_total", model=DEFAULT_MODEL)
            # When the session runs until it waits
            await metered.run_until_idle(driver, "s-crash")
            spend = await metered.ledger.session("s-crash")
            row = await metered.sessions.get("s-crash")
            after = _metric("warroom_model_calls_total", model=DEFAULT_MODEL, priced="true")
            cost_after = _metric("warroom_model_cost_usd_total", model=DEFAULT_MODEL)
        finally:
            await close_metered(metered)
    # Then the overloaded attempt was sent but not answered, and every answered call,
    # the one whose step crashed included, is in the ledger exactly once
    assert len(fake.requests) == len(fake.answered) + 1 == 5
    assert spend.calls == len(fake.answered) == 4
    served = served_usage(fake.answered)
    assert (spend.usage.input_tokens, spend.usage.output_tokens) == (
        served.input_tokens,
        served.output_tokens,
    )
    assert spend.usage.cache_read_tokens == served.cache_read_input_tokens
    assert spend.usage.cache_write_tokens == served.cache_creation_input_tokens
    # priced at the table's price of the model the API named
    assert spend.cost_nanousd == sum(served_cost_nanousd(fake.answered)) > 0
    assert spend.unpriced_calls == 0
    # and the metrics counted the same calls and dollars
    assert after - before == 4
    assert cost_after - cost_before == pytest.approx(spend.cost_nanousd / 10**9)
    # while the committed checkpoint counts only the three calls whose steps committed
    assert row is not None
    lost = fake.answered[2]["usage"]["output_tokens"]
    assert row.usage.output_tokens == served.output_tokens - lost
    # and the answer's footer shows the ledger's total, lost call included
    (answer,) = metered.answers.posted["s-crash"]
    assert answer.startswith("Done: the pool shrank.\n\n_")
    assert f"{served.total():,} tokens" in answer


async def test_a_session_cap_stops_the_session_at_the_cap_and_not_before(
    postgres_url: str, fake_busy: FakeAnthropicAPI, tmp_path: Path
) -> None:
    # Given a session cap of about two and a half calls' cost
    metered = await _metered(postgres_url, fake_busy, tmp_path)
    try:
        probe = metered.driver()
        await metered.open("s-probe")
        for _ in range(3):  # three steps: model, tool, model
            token = metered.pending.pop("s-probe")
            await probe.run("s-probe", token)
        first_two = sum(served_cost_nanousd(fake_busy.answered))
        cap_usd = float(first_two) * 1.25 / 10**9
        fake_busy.answered.clear()
        capped = metered.driver(Limits(max_session_cost_usd=cap_usd, loop_repeats=10**6))
        # When a new session works without end under that cap
        await metered.open("s-capped")
        await metered.run_until_idle(capped, "s-capped")
        spend = await metered.ledger.session("s-capped")
        # Then it stopped at the first call that took it to the cap, and not before
        costs = served_cost_nanousd(fake_busy.answered)
        cap = int(cap_usd * 10**9)
        assert sum(costs[:-1]) < cap <= sum(costs)
        assert spend.cost_nanousd == sum(costs)
        # and its answer says which cap, written without another model call
        (answer,) = metered.answers.posted["s-capped"]
        assert "session's spending cap was reached" in answer
        assert "raise the cap and reply" in answer
        calls_at_cap = len(fake_busy.answered)

        # When the cap is raised and someone replies
        raised = metered.driver(Limits(max_session_cost_usd=cap_usd * 100, loop_repeats=10**6))
        await metered.reply("s-capped", FINISH)
        await metered.run_until_idle(raised, "s-capped")
        # Then the session continues: the model is asked again and answers
        assert len(fake_busy.answered) == calls_at_cap + 1
        last = metered.answers.posted["s-capped"][-1]
        assert last.startswith("The pool shrank at 14:02; that is the cause.")
    finally:
        await close_metered(metered)


async def test_a_reply_under_a_cap_still_reached_gets_the_cap_answer_without_a_model_call(
    postgres_url: str, fake_busy: FakeAnthropicAPI, tmp_path: Path
) -> None:
    metered = await _metered(postgres_url, fake_busy, tmp_path)
    try:
        driver = metered.driver(Limits(max_session_cost_usd=1e-9, loop_repeats=10**6))
        await metered.open("s-tiny")
        await metered.run_until_idle(driver, "s-tiny")
        calls = len(fake_busy.answered)
        await metered.reply("s-tiny", FINISH)
        await metered.run_until_idle(driver, "s-tiny")
    finally:
        await close_metered(metered)
    assert calls == 1  # the first call reached the cap
    assert len(fake_busy.answered) == calls
    assert "not given to the model" in metered.answers.posted["s-tiny"][-1]


async def test_the_org_daily_cap_stops_another_session_of_the_org_before_any_call(
    postgres_url: str, fake_busy: FakeAnthropicAPI, tmp_path: Path
) -> None:
    metered = await _metered(postgres_url, fake_busy, tmp_path)
    try:
        # Given one session of the org that spent something today
        spender = metered.driver()
        await metered.open("s-spender")
        token = metered.pending.pop("s-spender")
        await spender.run("s-spender", token)
        spent = sum(served_cost_nanousd(fake_busy.answered))
        # When another session of the org starts under a daily cap below that
        capped = metered.driver(Limits(max_org_day_cost_usd=spent / 2 / 10**9))
        await metered.open("s-second")
        await metered.run_until_idle(capped, "s-second")
    finally:
        await close_metered(metered)
    # Then it answers, naming the org's daily cap, without calling the model
    assert len(fake_busy.answered) == 1
    (answer,) = metered.answers.posted["s-second"]
    assert "organisation's daily spending cap was reached" in answer


def test_every_priced_row_names_its_source_and_date() -> None:
    prices = default_prices()
    for model in prices.models():
        price = prices.get(model)
        assert price is not None
        assert price.source.startswith("https://platform.claude.com/")
        assert price.read_on.year >= 2026


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0
