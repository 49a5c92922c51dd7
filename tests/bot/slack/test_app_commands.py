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
from memory_store import EgressEntry, EgressLog, Namespace, Scope, SessionKey
from tests.bot.conftest import load_case
from tests.bot.slack_edge import SlackEdge, running_edge

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
