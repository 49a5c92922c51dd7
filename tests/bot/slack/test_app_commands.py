"""``/agent`` and the skills editor through the running app: ack first, modal in time, saves."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.slack.app import AGENT_USAGE
from bot.slack.installation import Installation
from bot.slack.skills.command import USAGE as SKILLS_USAGE
from harness import postmortem_request, request_for_model
from memory_store import (
    EgressEntry,
    EgressLog,
    ModelCall,
    ModelCallLog,
    Namespace,
    Scope,
    SessionKey,
    TokenUsage,
)
from tests.bot.conftest import load_case
from tests.bot.slack_edge import SlackEdge, event, running_edge
from tests.fakes.slack_api import WORKSPACE_URL

TRIGGER = "1000000000001.0000000000002.fakefakefakefakefakefakefakefake"
SKILLS = Namespace("E0FAKEORG", Scope.SKILLS)


@pytest.fixture
async def edge(tmp_path: Path) -> AsyncIterator[SlackEdge]:
    async with running_edge(tmp_path) as running:
        yield running


def command(text: str) -> dict[str, str]:
    return {**load_case("slash_command_agent_skills_edit.parsed.json"), "text": text}


def view_submission(view: dict[str, Any], values: dict[str, str]) -> dict[str, str]:
    body = copy.deepcopy(load_case("interactive_view_submission.json"))
    body["view"].update(
        id=view["id"],
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        blocks=view["blocks"],
        state={
            "values": {
                block: {"value": {"type": "plain_text_input", "value": value}}
                for block, value in values.items()
            }
        },
    )
    return {"payload": json.dumps(body)}


async def test_the_command_is_acked_before_the_modal_opens_and_the_modal_still_opens(
    edge: SlackEdge,
) -> None:
    # Given Slack answers the first views.open with a 429 (Retry-After: 1 s)
    edge.slack_api.rate_limit_next("views.open", retry_after_s=1)
    # When someone runs /agent skills edit triage
    started = time.monotonic()
    response = await edge.post_form(command("skills edit triage"))
    acked_after_s = time.monotonic() - started
    await edge.settle()
    # Then the ack did not wait for the modal, and the loading modal opened in time
    assert response.status_code == 200
    assert acked_after_s < 0.5
    opened = [c for c in edge.slack_api.calls_to("views.open") if c.status == 200]
    assert [c.args["trigger_id"] for c in opened] == [TRIGGER]
    assert opened[0].at_s - started < 3.0


async def test_an_expired_trigger_is_told_to_the_user_instead_of_failing_silently(
    edge: SlackEdge,
) -> None:
    edge.slack_api.expire_trigger(TRIGGER)

    response = await edge.post_form(command("skills edit triage"))
    await edge.settle()

    assert response.status_code == 200
    (ephemeral,) = edge.slack_api.state.ephemerals
    assert "3 seconds" in ephemeral["text"]


async def test_agent_without_a_known_subcommand_answers_with_usage_in_the_ack(
    edge: SlackEdge,
) -> None:
    # Given a DM, where chat.postEphemeral is refused
    response = await edge.post_form({**command("dance"), "channel_id": "D0FAKEDM"})
    await edge.settle()

    assert response.status_code == 200
    assert response.text == AGENT_USAGE  # Slack shows a plain-text ack to the user alone
    assert edge.slack_api.calls_to("chat.postEphemeral") == []


@pytest.mark.parametrize("where", ["a DM", "a channel without the bot"])
async def test_skills_replies_reach_the_user_where_the_bot_is_not(
    edge: SlackEdge, where: str
) -> None:
    channel = "D0FAKEDM" if where == "a DM" else "C0NOBOT"
    edge.slack_api.remove_bot("C0NOBOT")

    await edge.post_form({**command("skills list"), "channel_id": channel})
    await edge.settle()

    (reply,) = edge.slack_api.state.ephemerals
    assert reply["response_url"].startswith("/commands/")
    assert reply["response_type"] == "ephemeral"
    assert reply["text"]
    assert edge.slack_api.calls_to("chat.postEphemeral") == []


async def test_skills_without_a_verb_answers_with_the_skills_usage(edge: SlackEdge) -> None:
    await edge.post_form(command("skills"))
    await edge.settle()

    (ephemeral,) = edge.slack_api.state.ephemerals
    assert ephemeral["text"] == SKILLS_USAGE


async def test_a_skill_editor_submission_is_acked_with_the_result_of_the_save(
    edge: SlackEdge,
) -> None:
    # Given the new-skill modal, opened through /agent skills new
    await edge.post_form(command("skills new"))
    await edge.settle()
    view = edge.slack_api.state.views[
        edge.slack_api.calls_to("views.open")[0].response["view"]["id"]
    ]
    content = "---\nname: restart-pods\ndescription: Restarts pods safely.\n---\n1. Drain\n"
    # When the user submits it
    response = await edge.post_form(
        view_submission(view, {"skill_name": "restart-pods", "skill_part_1": content})
    )
    # Then the ack carries the modal's new content and the skill is stored
    assert response.status_code == 200
    answer = response.json()
    assert answer["response_action"] == "update"
    assert "Saved `restart-pods` as version 1" in json.dumps(answer["view"])
    stored = await edge.files.read(SKILLS, "/restart-pods/SKILL.md")
    assert stored.content == content


async def test_a_slack_connect_user_saves_a_skill_in_the_installing_org(tmp_path: Path) -> None:
    async with running_edge(tmp_path, installation=Installation("T0FAKETEAM", "E0FAKEORG")) as edge:
        # Given the new-skill modal, opened in the installing org's shared channel
        await edge.post_form(command("skills new"))
        await edge.settle()
        view = edge.slack_api.state.views[
            edge.slack_api.calls_to("views.open")[0].response["view"]["id"]
        ]
        content = "---\nname: vendor-runbook\ndescription: Vendor failover steps.\n---\n1. Call\n"
        # When a Slack Connect user of another org submits it (their team in the payload)
        form = view_submission(view, {"skill_name": "vendor-runbook", "skill_part_1": content})
        body = json.loads(form["payload"])
        body["team"] = {"id": "T0FAKEVENDR", "domain": "vendor-co"}
        body["user"]["team_id"] = "T0FAKEVENDR"
        body.pop("enterprise")
        response = await edge.post_form({"payload": json.dumps(body)})
        # Then the save lands in the org the app is installed in (view.app_installed_team_id)
        assert "Saved `vendor-runbook` as version 1" in json.dumps(response.json()["view"])
        stored = await edge.files.read(SKILLS, "/vendor-runbook/SKILL.md")
        assert stored.content == content


MEMORY = Namespace("E0FAKEORG", Scope.MEMORY)


async def test_agent_memory_lists_the_orgs_memory_and_prunes_it(edge: SlackEdge) -> None:
    # Given two memory files in the org
    from memory_store import Origin

    for path in ("/teams.md", "/old-incident.md"):
        await edge.files.write(MEMORY, path, f"# {path}\n", Origin("U0SOMEONE"), expected_version=0)
    # When someone lists memory, then deletes one file from Slack
    await edge.post_form(command("memory"))
    await edge.settle()
    await edge.post_form(command("memory rm /memory/old-incident.md /etc/passwd"))
    await edge.settle()
    # Then the listing named both, the deletion reached the store, the stray path was refused
    listing, removal = edge.slack_api.state.ephemerals
    assert "`/memory/teams.md`" in listing["text"]
    assert "`/memory/old-incident.md`" in listing["text"]
    assert "`/memory/old-incident.md`: deleted" in removal["text"]
    assert "`/etc/passwd`: not under /memory/" in removal["text"]
    assert [e.path for e in await edge.files.glob(MEMORY, "**", "/")] == ["/teams.md"]


async def test_agent_usage_shows_the_channels_and_the_orgs_spend_today(edge: SlackEdge) -> None:
    # Given calls of this org: two in this channel, one in another, one of another org
    body = command("usage")
    org, channel = "E0FAKEORG", str(body["channel_id"])
    now = datetime.now(UTC)
    ledger = ModelCallLog(edge.database)
    for where, cost in ((channel, 20_000_000), (channel, 5_000_000), ("C0OTHER", 111_000_000)):
        await ledger.record(_call(org, where, now, cost))
    await ledger.record(_call("T0ELSE", channel, now, 999_000_000_000))
    # When someone runs /agent usage in the channel
    response = await edge.post_form(body)
    await edge.settle()
    # Then the reply gives this channel's and the org's spend, today and this month
    assert response.status_code == 200
    (reply,) = edge.slack_api.state.ephemerals
    lines = reply["text"].splitlines()
    assert lines[1].startswith(f"<#{channel}>: today 2,230 tokens · $0.025")
    assert lines[2].startswith("The org: today 3,345 tokens · $0.14")


def _call(org: str, channel: str, at: datetime, cost: int) -> ModelCall:
    return ModelCall(
        session_id=f"s-{channel}-{cost}",
        key=SessionKey(org, channel, "1.0"),
        at=at,
        model="claude-sonnet-5-5",
        usage=TokenUsage(100, 15, 1000, 0),
        cost_nanousd=cost,
        priced=True,
    )


async def _incident(edge: SlackEdge, channel: str, texts: list[str]) -> str:
    """A session in ``channel`` whose thread holds ``texts`` (a mention, then replies)."""
    root = "1796100000.000100"
    opened = await edge.sessions.open_or_join(
        SessionKey("E0FAKEORG", channel, root),
        requester_id="U0ALICE",
        initial_checkpoint="{}",
        text=texts[0],
        source_ts=root,
    )
    for i, text in enumerate(texts[1:], start=1):
        await edge.sessions.add_input(
            opened.session_id, user_id="U0CAROL", text=text, source_ts=f"1796100000.{i + 100:06d}"
        )
    return root


async def test_agent_timeline_posts_the_channels_timeline_with_permalinks(edge: SlackEdge) -> None:
    # Given a thread in the channel: alice's mention and carol's reply
    body = command("timeline")
    channel = str(body["channel_id"])
    root = await _incident(edge, channel, ["checkout-api 500s since 14:02", "check the pool"])
    # When someone runs /agent timeline there
    response = await edge.post_form(body)
    await edge.settle()
    # Then the bot posts the timeline in the channel, each message linked to itself
    assert response.status_code == 200
    (post,) = [c for c in edge.slack_api.calls_to("chat.postMessage") if c.status == 200]
    assert post.args["channel"] == channel
    assert "thread_ts" not in post.args
    markdown = post.args["blocks"][0]["text"]
    thread_link = f"?thread_ts={root}&cid={channel}"
    first = f"{WORKSPACE_URL}archives/{channel}/p{root.replace('.', '')}"
    second = f"{WORKSPACE_URL}archives/{channel}/p1796100000000101{thread_link}"
    assert "**T1**" in markdown
    assert f"message: checkout-api 500s since 14:02 [↗]({first})" in markdown
    assert "**T2**" in markdown
    assert f"<@U0CAROL> · message: check the pool [↗]({second})" in markdown


async def test_a_long_timeline_is_posted_as_a_file(edge: SlackEdge) -> None:
    body = command("timeline")
    channel = str(body["channel_id"])
    await _incident(edge, channel, [f"reading number {i}: " + "x" * 180 for i in range(300)])

    await edge.post_form(body)
    await edge.settle()

    (upload,) = edge.slack_api.state.files.values()
    content = upload["content"].decode()
    assert upload["name"] == "timeline.md"
    assert "**T300**" in content
    assert not [c for c in edge.slack_api.calls_to("chat.postMessage") if c.status == 200]


async def test_agent_timeline_where_the_bot_is_not_tells_the_person(edge: SlackEdge) -> None:
    body = command("timeline")
    edge.slack_api.state.bot_absent.add(str(body["channel_id"]))

    await edge.post_form(body)
    await edge.settle()

    (reply,) = edge.slack_api.state.ephemerals
    assert "invite me" in reply["text"]


async def test_agent_postmortem_opens_a_thread_and_starts_the_drafting_session(
    edge: SlackEdge,
) -> None:
    # When someone runs /agent postmortem in the incident channel
    body = command("postmortem")
    response = await edge.post_form(body)
    await edge.settle()
    # Then the bot opens a thread in the channel saying what it does
    assert response.status_code == 200
    (post,) = [c for c in edge.slack_api.calls_to("chat.postMessage") if c.status == 200]
    assert post.args["channel"] == body["channel_id"]
    assert "/incident/postmortem.md" in post.args["text"]
    # and a session on that thread is woken with what the person typed (the record's
    # message), which asks the model to draft it
    session = await edge.session(str(post.response["ts"]), org="E0FAKEORG")
    assert session is not None
    assert session.requester_id == body["user_id"]
    assert await edge.inbox_texts(session.id) == ["/agent postmortem"]
    assert request_for_model("/agent postmortem") == postmortem_request()
    assert [call[0] for call in edge.enqueued.calls] == [session.id]


async def test_a_mention_saying_postmortem_starts_the_drafting_session(edge: SlackEdge) -> None:
    mention = event("event_app_mention_top_level.json", text="<@U0FAKEBOT> postmortem", blocks=None)

    assert (await edge.post_event(mention)).status_code == 200
    await edge.settle()

    session = await edge.session(str(mention["event"]["ts"]))
    assert session is not None
    assert await edge.inbox_texts(session.id) == ["postmortem"]  # as typed, for the record
    assert request_for_model("postmortem") == postmortem_request()


ORG = "E0FAKEORG"  # the command's enterprise_id: sessions of this org are the command's
INCIDENT = "C0FAKEINC"


def _request(session_id: str, n: int, **changes: Any) -> EgressEntry:
    entry = EgressEntry(
        session_id=session_id,
        tool_use_id=f"toolu_{n}",
        at=datetime(2026, 11, 30, 14, 2, n, tzinfo=UTC),
        method="GET",
        host="prometheus.internal",
        port=443,
        path="/api/v1/query_range?query&start&end&step",
        status=200,
        bytes=5120,
        duration_ms=41.0,
        rule="prometheus",
        outcome="injected",
    )
    return replace(entry, **changes)


async def _session(edge: SlackEdge, session_id: str, thread_ts: str) -> None:
    await edge.sessions.open_or_join(
        SessionKey(ORG, INCIDENT, thread_ts), requester_id="U0FAKEBOB", initial_checkpoint="{}",
        text="look", source_ts=thread_ts, session_id=session_id,
    )  # fmt: skip


async def test_agent_egress_lists_the_requests_of_the_channels_latest_session_or_a_named_one(
    edge: SlackEdge,
) -> None:
    # Given two sessions of the channel that went through the egress gateway
    await _session(edge, "s-1-older", "1764511000.000100")
    await _session(edge, "s-2-latest", "1764511320.000100")
    log = EgressLog(edge.database)
    await log.record(_request("s-1-older", 1, host="grafana.internal"))
    await log.record(_request("s-2-latest", 7))
    await log.record(
        _request("s-2-latest", 9, method="POST", path="/api/v1/admin", status=403,
                 rule=None, outcome="blocked")
    )  # fmt: skip
    # When someone runs /agent egress, then names the older thread by its link, then a thread
    # of another channel
    link = "https://fake-co.slack.com/archives/{}/p1764511000000100"
    for text in ("egress", f"egress {link.format(INCIDENT)}", f"egress {link.format('C0PRIV')}"):
        response = await edge.post_form(command(text))
        assert response.status_code == 200
        await edge.settle()
    # Then each answer came through the command's response_url, to the user alone
    latest, older, refused = edge.slack_api.state.ephemerals
    assert {r["response_type"] for r in (latest, older, refused)} == {"ephemeral"}
    # the latest session's requests, oldest first: time, method, host, path, status, outcome,
    # rule (mrkdwn: & is escaped, as Slack asks)
    assert latest["text"].splitlines()[1:] == [
        "`11-30 14:02:07` GET "
        "`prometheus.internal:443/api/v1/query_range?query&amp;start&amp;end&amp;step`"
        " → 200 · injected · rule prometheus",
        "`11-30 14:02:09` POST `prometheus.internal:443/api/v1/admin` → 403 · blocked · no rule",
    ]
    assert "thread 1764511320.000100" in latest["text"]
    assert "grafana.internal" in older["text"]
    assert "prometheus.internal" not in older["text"]
    # and another channel's thread is not shown here
    assert refused["text"] == "That thread is in another channel: run `/agent egress` there."


async def test_agent_egress_in_a_channel_without_sessions_says_so(edge: SlackEdge) -> None:
    await edge.post_form(command("egress"))
    await edge.settle()

    (reply,) = edge.slack_api.state.ephemerals
    assert reply["text"] == "No Warroom session has run in this channel yet."
