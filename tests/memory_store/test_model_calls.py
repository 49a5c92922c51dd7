"""The model-call ledger on both backends: sums per session, channel, org and time window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory_store import Database, ModelCall, ModelCallLog, SessionKey, TokenUsage

T0 = datetime(2026, 12, 1, 23, 30, tzinfo=UTC)


def _call(
    org: str, channel: str, session: str, minutes: int, cost: int, priced: bool = True
) -> ModelCall:
    return ModelCall(
        session_id=session,
        key=SessionKey(org, channel, session),
        at=T0 + timedelta(minutes=minutes),
        model="claude-sonnet-5-5" if priced else "claude-unknown",
        usage=TokenUsage(10, 2, 100, 5),
        cost_nanousd=cost,
        priced=priced,
        request_id=f"req_{session}_{minutes}",
    )


async def test_spend_sums_by_session_channel_org_and_day(file_db: Database, org: str) -> None:
    log = ModelCallLog(file_db)
    # Given calls in two channels of the org, either side of midnight UTC, and another org's
    await log.record(_call(org, "C1", "s1", 0, 1_000))
    await log.record(_call(org, "C1", "s1", 40, 2_000))  # 00:10 the next day
    await log.record(_call(org, "C2", "s2", 45, 4_000, priced=False))
    await log.record(_call(f"{org}x", "C1", "s9", 45, 8_000))
    next_day = datetime(2026, 12, 2, tzinfo=UTC)
    # Then each sum holds only its own calls
    s1 = await log.session("s1")
    assert (s1.calls, s1.cost_nanousd, s1.usage) == (2, 3_000, TokenUsage(20, 4, 200, 10))
    today = await log.spent(org, since=next_day)
    assert (today.calls, today.cost_nanousd, today.unpriced_calls) == (2, 6_000, 1)
    channel = await log.spent(org, since=T0, channel_id="C1")
    assert channel.cost_nanousd == 3_000
    yesterday = await log.spent(org, since=T0, until=next_day)
    assert yesterday.cost_nanousd == 1_000
    assert await log.for_caps("s1", org, since=next_day) == (3_000, 6_000)
    by_session = await log.by_session(["s1", "s2", "nobody"])
    assert sorted(by_session) == ["s1", "s2"]
