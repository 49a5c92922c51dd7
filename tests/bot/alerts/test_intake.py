"""The intake both ways in call: an alert already in Slack (a watched channel), a thread a
person already mentioned the bot in, and a session stopped by a person."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.alerts.intake import AlertPolicy
from bot.alerts.model import Alert, AlertStatus
from bot.errors import SlackCallFailed
from bot.slack.intake import early_reply_key
from memory_store import SessionKey, SessionStatus
from tests.bot.alerts.alert_support import alert_edge
from tests.bot.slack_edge import CHANNEL


def _alert(n: int, *, status: AlertStatus = AlertStatus.FIRING) -> Alert:
    return Alert(
        "slack:alertmanager",
        "slack:alertmanager:checkout",
        status,
        "checkout-api 500s",
        severity="critical",
        delivery_id=f"{CHANNEL}:{n}",
    )


async def test_an_alert_posted_in_a_channel_opens_its_session_on_that_message(
    tmp_path: Path,
) -> None:
    async with alert_edge(tmp_path, taking=False) as edge:
        slack = edge.edge.slack_api
        # Given an alerting app's message in the channel
        root = slack.add_message(CHANNEL, "[FIRING:1] CheckoutErrors", user="U0ALERTAPP")
        # When the watched channel hands it to the intake
        outcome = await edge.intake.take_alert(
            _alert(1), org_id=edge.org, posted_thread=(CHANNEL, root)
        )
        # Then the session is that message's thread's, and the bot did not repost the alert
        assert outcome.kind == "started"
        assert outcome.thread_ts == root
        thread = slack.thread(CHANNEL, root)
        assert [m["ts"] == root for m in thread] == [True, False]
        assert "on it" in thread[1]["text"]
        # and the same Slack message delivered again is taken once
        again = await edge.intake.take_alert(
            _alert(1), org_id=edge.org, posted_thread=(CHANNEL, root)
        )
        assert again.kind == "duplicate"


async def test_a_thread_a_person_already_mentioned_the_bot_in_is_not_started_twice(
    tmp_path: Path,
) -> None:
    async with alert_edge(tmp_path, taking=False) as edge:
        slack = edge.edge.slack_api
        root = slack.add_message(CHANNEL, "[FIRING:1] CheckoutErrors", user="U0ALERTAPP")
        # Given a person's mention in that thread already started a session
        opened = await edge.edge.sessions.open_or_join(
            edge_key := SessionKey(edge.org, CHANNEL, root),
            requester_id="U0FAKEALICE",
            initial_checkpoint="{}",
            text="look at this",
            source_ts="9.9",
        )
        # When the alert is taken there
        outcome = await edge.intake.take_alert(
            _alert(1), org_id=edge.org, posted_thread=(CHANNEL, root)
        )
        # Then it joins that session as an input: no second session, no second "on it"
        assert outcome.kind == "joined"
        assert outcome.session_id == opened.session_id
        assert (await edge.edge.sessions.find(edge_key)) is not None
        inbox = await edge.edge.inbox_texts(opened.session_id)
        assert len(inbox) == 2
        assert not any("on it" in m.get("text", "") for m in slack.thread(CHANNEL, root))


async def test_a_stopped_session_is_told_no_more_alerts_but_the_thread_still_shows_them(
    tmp_path: Path,
) -> None:
    async with alert_edge(tmp_path, policy=AlertPolicy(burst_window_s=0), taking=False) as edge:
        slack = edge.edge.slack_api
        root = slack.add_message(CHANNEL, "[FIRING:1] CheckoutErrors", user="U0ALERTAPP")
        started = await edge.intake.take_alert(
            _alert(1), org_id=edge.org, posted_thread=(CHANNEL, root)
        )
        assert started.session_id is not None
        # Given a person stopped the session (the `stop` reply or the Stop button)
        cancelled = await edge.edge.sessions.cancel(started.session_id, actor="U0FAKEALICE")
        assert cancelled is not None
        before = len(await edge.edge.inbox_texts(started.session_id))
        # When the problem fires again
        again = await edge.intake.take_alert(
            _alert(2), org_id=edge.org, posted_thread=(CHANNEL, "2.0")
        )
        await edge.edge.poster.flush()
        # Then the thread says so, the session is not woken and gets no input
        assert again.kind == "noted"
        assert any("Still firing" in m.get("text", "") for m in slack.thread(CHANNEL, root))
        session = await edge.edge.sessions.get(started.session_id)
        assert session is not None
        assert session.status is SessionStatus.CANCELLED
        assert len(await edge.edge.inbox_texts(started.session_id)) == before
        # and a stopped session frees its place under the cap
        other = Alert("generic", "generic:other", AlertStatus.FIRING, "disk", delivery_id="o1")
        limited = await edge.intake.take_alert(other, org_id=edge.org, route=CHANNEL)
        assert limited.kind == "started"


async def test_over_the_cap_a_new_problem_goes_to_the_summary_thread(tmp_path: Path) -> None:
    async with alert_edge(tmp_path, policy=AlertPolicy(max_open_per_org=1), taking=False) as edge:
        first = Alert("generic", "generic:a", AlertStatus.FIRING, "A is down", delivery_id="a1")
        second = Alert("generic", "generic:b", AlertStatus.FIRING, "B is down", delivery_id="b1")
        assert (
            await edge.intake.take_alert(first, org_id=edge.org, route=CHANNEL)
        ).kind == "started"
        folded = await edge.intake.take_alert(second, org_id=edge.org, route=CHANNEL)
        assert folded.kind == "folded"
        assert folded.thread_ts is not None
        (summary,) = [m for m in edge.edge.slack_api.thread(CHANNEL, folded.thread_ts)]
        assert "B is down" in str(summary.get("blocks"))


async def test_a_channel_slack_refuses_leaves_the_alert_on_record_as_failed(
    tmp_path: Path,
) -> None:
    async with alert_edge(tmp_path, taking=False) as edge:
        # Given a route to a channel the bot cannot post in
        edge.edge.slack_api.break_channel("C0ARCHIVED")
        alert = Alert("generic", "generic:x", AlertStatus.FIRING, "X is down", delivery_id="x1")
        # When an alert goes there
        with pytest.raises(SlackCallFailed):
            await edge.intake.take_alert(alert, org_id=edge.org, route="C0ARCHIVED")
        # Then it is on record as failed, frees its place, and a later one can open a thread
        tally = await edge.store.tally(edge.org)
        assert (tally.failed, tally.unaccounted, tally.open_session_threads) == (1, 0, 0)
        later = Alert("generic", "generic:x", AlertStatus.FIRING, "X is down", delivery_id="x2")
        assert (
            await edge.intake.take_alert(later, org_id=edge.org, route=CHANNEL)
        ).kind == "started"


async def test_a_thread_decided_but_never_posted_is_opened_by_the_next_pass(
    tmp_path: Path,
) -> None:
    async with alert_edge(tmp_path, taking=False) as edge:
        # Given an alert decided (a thread "opening") whose process died before posting
        alert = Alert("generic", "generic:y", AlertStatus.FIRING, "Y is down", delivery_id="y1")
        (row,) = await edge.intake.record([(alert, CHANNEL)], org_id=edge.org)
        await edge.store.decide(row, max_open=5, burst_window_s=60, summary_channel_id=CHANNEL)
        # When the taker resumes what was left
        assert await edge.intake.resume_openings(older_than_s=0) == 1
        # Then the thread is in Slack with its session
        thread = await edge.store.open_thread(edge.org, "generic:y")
        assert thread is not None
        assert thread.thread_ts is not None
        assert thread.session_id is not None
        assert await edge.intake.resume_openings(older_than_s=0) == 0


async def test_a_reply_in_the_alert_thread_before_its_session_reaches_the_session(
    tmp_path: Path,
) -> None:
    async with alert_edge(tmp_path, taking=False) as edge:
        slack = edge.edge.slack_api
        root = slack.add_message(CHANNEL, "[FIRING:1] CheckoutErrors", user="U0ALERTAPP")
        # Given a person replied in the alert's thread before the taker opened its session
        # (the Slack intake remembered that the thread has a reply)
        slack.add_message(CHANNEL, "this started after the deploy", thread_ts=root)
        key = SessionKey(edge.org, CHANNEL, root)
        await edge.edge.dedupe.first_sightings([early_reply_key(key)])
        # When the alert's session opens
        outcome = await edge.intake.take_alert(
            _alert(1), org_id=edge.org, posted_thread=(CHANNEL, root)
        )
        # Then the reply is one of its inputs, before its first step
        assert outcome.session_id is not None
        inbox = await edge.edge.inbox_texts(outcome.session_id)
        assert inbox[-1] == "this started after the deploy"
