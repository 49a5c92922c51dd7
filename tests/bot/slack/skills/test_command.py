"""``/agent skills …`` over the real store and the real Slack client (fake Slack API)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.skills.command import USAGE, SkillsCommand, SkillsCommands
from bot.slack.skills.edit_policy import EditPolicy
from bot.slack.skills.editor import Submission
from memory_store import FileNotFound, FileStore, Namespace, Origin, Scope
from tests.bot.conftest import load_case
from tests.fakes.slack_api import FakeSlackApi

ORG = "E0FAKEORG"  # enterprise_id of the payloads in tests/bot/data/slack
SKILLS = Namespace(ORG, Scope.SKILLS)
TRIGGER = "1000000000001.0000000000002.fakefakefakefakefakefakefakefake"


def skill(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def long_body(lines: int) -> str:
    return "".join(
        f"{i}. Check the `checkout` dashboard, panel {i}, for 5xx spikes.\n" for i in range(lines)
    )


async def seed(store: FileStore, name: str, content: str, *, actor: str = "U0FAKEBOB") -> int:
    result = await store.write(
        SKILLS, f"/{name}/SKILL.md", content, Origin(actor), expected_version=None
    )
    return result.version


def command(text: str, *, user: str = "U0FAKEALICE") -> SkillsCommand:
    body = load_case("slash_command_agent_skills_edit.parsed.json")
    # no response_url: these replies take the chat.postEphemeral path
    return SkillsCommand.from_body({**body, "text": text, "user_id": user, "response_url": ""})


def open_view(slack_api: FakeSlackApi) -> dict[str, Any]:
    (view,) = slack_api.state.views.values()
    return view


def typed_values(view: dict[str, Any]) -> dict[str, str | None]:
    """What Slack would submit if the user changed nothing: each input's initial value."""
    return {
        block["block_id"]: block["element"].get("initial_value")
        for block in view["blocks"]
        if block["type"] == "input"
    }


def submission(
    view: dict[str, Any], values: dict[str, str | None], *, user: str = "U0FAKEALICE"
) -> Submission:
    body = copy.deepcopy(load_case("interactive_view_submission.json"))
    body["user"]["id"] = user
    body["view"].update(
        id=view["id"],
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        blocks=view["blocks"],
        state={
            "values": {
                block_id: {"value": {"type": "plain_text_input", "value": value}}
                for block_id, value in values.items()
            }
        },
    )
    return Submission.from_body(body)


def ephemeral_texts(slack_api: FakeSlackApi) -> list[str]:
    return [
        json.dumps(e.get("blocks"), ensure_ascii=False) + e["text"]
        for e in slack_api.state.ephemerals
    ]


@pytest.fixture
def skills(file_store: FileStore, slack_client: AsyncWebClient) -> SkillsCommands:
    return SkillsCommands(file_store, slack_client, EditPolicy())


async def test_editing_a_7000_char_skill_round_trips_through_several_inputs(
    skills: SkillsCommands, file_store: FileStore, slack_api: FakeSlackApi
) -> None:
    # Given a skill longer than two 3,000-char inputs
    original = skill("triage", "First response to a paging alert", long_body(112))
    assert 7_000 <= len(original) < 9_000
    await seed(file_store, "triage", original)
    # When Alice runs /agent skills edit triage
    await skills.handle_command(command("skills edit triage"))
    # Then a loading modal opened at once and was filled with the content in several inputs
    assert [c.method for c in slack_api.calls] == ["views.open", "views.update"]
    assert "Loading" in json.dumps(slack_api.calls[0].args["view"])
    view = open_view(slack_api)
    values = typed_values(view)
    assert list(values) == ["skill_part_1", "skill_part_2", "skill_part_3", "skill_part_4"]
    assert all(len(v or "") <= 3_000 for v in values.values())
    assert values["skill_part_4"] is None
    assert json.loads(view["private_metadata"]) == {"org": ORG, "name": "triage", "base": 1}
    # When she changes a line in the second input and saves
    values["skill_part_2"] = (values["skill_part_2"] or "").replace("panel 50,", "panel 50 (p99),")
    response = await skills.handle_submission(submission(view, values))
    # Then the store has exactly the edited text as version 2
    assert response is not None
    assert "Saved `triage` as version 2" in json.dumps(response["view"])
    current = await file_store.read(SKILLS, "/triage/SKILL.md")
    assert current.version == 2
    assert current.content == original.replace("panel 50,", "panel 50 (p99),")
    assert current.actor == "U0FAKEALICE"


async def test_saving_over_a_newer_version_is_refused_with_the_diff_on_the_field(
    skills: SkillsCommands, file_store: FileStore, slack_api: FakeSlackApi
) -> None:
    # Given Alice opened the editor at version 1
    original = skill("triage", "First response", "1. Check dashboards\n2. Page the owner\n")
    await seed(file_store, "triage", original)
    await skills.handle_command(command("skills edit triage"))
    view = open_view(slack_api)
    # And Bob saved version 2 meanwhile
    await seed(file_store, "triage", original.replace("Page the owner", "Page payments on-call"))
    # When Alice saves her own change
    values = typed_values(view)
    values["skill_part_1"] = (values["skill_part_1"] or "") + "3. Write notes\n"
    response = await skills.handle_submission(submission(view, values))
    # Then the save is refused on the field, with Bob's change as a diff
    assert response is not None
    assert response["response_action"] == "errors"
    error = response["errors"]["skill_part_1"]
    assert "version 2 was saved by U0FAKEBOB after you opened version 1" in error
    assert "-2. Page the owner\n+2. Page payments on-call" in error
    current = await file_store.read(SKILLS, "/triage/SKILL.md")
    assert current.version == 2
    assert "Write notes" not in current.content


async def test_bad_frontmatter_is_shown_on_the_field(
    skills: SkillsCommands, file_store: FileStore, slack_api: FakeSlackApi
) -> None:
    await seed(file_store, "triage", skill("triage", "First response", "1. Check\n"))
    await skills.handle_command(command("skills edit triage"))
    view = open_view(slack_api)

    values = typed_values(view)
    values["skill_part_1"] = "---\nname: [triage\n---\n1. Check\n"
    response = await skills.handle_submission(submission(view, values))

    assert response is not None
    assert response["response_action"] == "errors"
    assert "not valid YAML" in response["errors"]["skill_part_1"]
    assert (await file_store.read(SKILLS, "/triage/SKILL.md")).version == 1


async def test_a_new_skill_with_a_taken_name_is_refused_on_the_name_field(
    skills: SkillsCommands, file_store: FileStore, slack_api: FakeSlackApi
) -> None:
    await seed(file_store, "triage", skill("triage", "First response", "1. Check\n"))
    await skills.handle_command(command("skills new"))
    view = open_view(slack_api)
    assert view["callback_id"] == "warroom_skill_new"

    values = typed_values(view)
    values.update(skill_name="triage", skill_part_1=skill("triage", "Another", "x\n"))
    taken = await skills.handle_submission(submission(view, values))
    values.update(skill_name="restart-pods", skill_part_1=skill("restart-pods", "Restarts", "x\n"))
    created = await skills.handle_submission(submission(view, values))

    assert taken is not None
    assert "already exists" in taken["errors"]["skill_name"]
    assert created is not None
    assert "as version 1" in json.dumps(created["view"])
    assert (await file_store.read(SKILLS, "/restart-pods/SKILL.md")).content.endswith("x\n")


async def test_an_expired_trigger_is_told_to_the_user_ephemerally(
    skills: SkillsCommands, file_store: FileStore, slack_api: FakeSlackApi
) -> None:
    await seed(file_store, "triage", skill("triage", "First response", "1. Check\n"))
    slack_api.expire_trigger(TRIGGER)

    await skills.handle_command(command("skills edit triage"))

    assert [c.method for c in slack_api.calls] == ["views.open", "chat.postEphemeral"]
    (ephemeral,) = slack_api.state.ephemerals
    assert ephemeral["user"] == "U0FAKEALICE"
    assert ephemeral["channel"] == "C0FAKEINC"
    assert "3 seconds" in ephemeral["text"]


async def test_the_allow_list_admits_listed_users_and_user_group_members_only(
    file_store: FileStore, slack_client: AsyncWebClient, slack_api: FakeSlackApi
) -> None:
    # Given editors = Bob, and the on-call user group (Carol)
    skills = SkillsCommands(file_store, slack_client, EditPolicy.parse("U0FAKEBOB, S0FAKEONCALL"))
    slack_api.set_usergroup("S0FAKEONCALL", ["U0FAKECAROL"])
    await seed(file_store, "triage", skill("triage", "First response", "1. Check\n"))
    # When each of them opens the editor
    opened = {}
    for user in ("U0FAKEALICE", "U0FAKEBOB", "U0FAKECAROL"):
        slack_api.state.views.clear()
        await skills.handle_command(command("skills edit triage", user=user))
        opened[user] = open_view(slack_api)
    # Then only Bob and Carol get the editor
    assert "not on the list" in json.dumps(opened["U0FAKEALICE"]["blocks"])
    assert opened["U0FAKEBOB"].get("callback_id") == "warroom_skill_edit"
    assert opened["U0FAKECAROL"].get("callback_id") == "warroom_skill_edit"
    # And a submission from Alice (an editor opened before she was removed) is refused too
    values = typed_values(opened["U0FAKEBOB"])
    refused = await skills.handle_submission(
        submission(opened["U0FAKEBOB"], values, user="U0FAKEALICE")
    )
    assert refused is not None
    assert "not on the list" in json.dumps(refused["view"])


async def test_list_shows_skill_names_with_their_descriptions(
    skills: SkillsCommands, file_store: FileStore, slack_api: FakeSlackApi
) -> None:
    await seed(file_store, "triage", skill("triage", "First response to a page", "1.\n"))
    await seed(file_store, "db-pool", skill("db-pool", "When the DB pool is exhausted", "1.\n"))

    await skills.handle_command(command("skills list"))

    (text,) = ephemeral_texts(slack_api)
    assert "`db-pool` — When the DB pool is exhausted" in text
    assert "`triage` — First response to a page" in text


async def test_show_prints_the_source_in_a_code_block(
    skills: SkillsCommands, file_store: FileStore, slack_api: FakeSlackApi
) -> None:
    content = skill("triage", "First response", "Run:\n```\nkubectl get pods\n```\n")
    await seed(file_store, "triage", content)

    await skills.handle_command(command("skills show triage"))

    (ephemeral,) = slack_api.state.ephemerals
    (block,) = ephemeral["blocks"]
    assert block["type"] == "markdown"
    assert block["text"] == f"**triage** · version 1\n\n````\n{content.rstrip()}\n````"


async def test_history_lists_versions_and_revert_restores_an_old_one(
    skills: SkillsCommands, file_store: FileStore, slack_api: FakeSlackApi
) -> None:
    first = skill("triage", "First response", "1. Check dashboards\n")
    await seed(file_store, "triage", first)
    await seed(file_store, "triage", first + "2. Page the owner\n", actor="agent")

    await skills.handle_command(command("skills history triage"))
    await skills.handle_command(command("skills revert triage 1"))

    history, reverted = ephemeral_texts(slack_api)
    assert history.index("*v2* write by agent") < history.index("*v1* create by <@U0FAKEBOB>")
    assert "now version 3" in reverted
    current = await file_store.read(SKILLS, "/triage/SKILL.md")
    assert (current.version, current.content) == (3, first)


async def test_delete_asks_for_confirmation_and_keeps_the_history(
    skills: SkillsCommands, file_store: FileStore, slack_api: FakeSlackApi
) -> None:
    await seed(file_store, "triage", skill("triage", "First response", "1. Check\n"))
    await skills.handle_command(command("skills delete triage"))
    view = open_view(slack_api)
    assert view["callback_id"] == "warroom_skill_delete"
    assert await file_store.read(SKILLS, "/triage/SKILL.md")  # nothing deleted yet

    response = await skills.handle_submission(submission(view, {}))

    assert response is not None
    assert "Deleted `triage`" in json.dumps(response["view"])
    with pytest.raises(FileNotFound):
        await file_store.read(SKILLS, "/triage/SKILL.md")
    assert [r.operation for r in await file_store.history(SKILLS, "/triage/SKILL.md")] == [
        "create",
        "delete",
    ]


async def test_unknown_subcommand_answers_with_usage(
    skills: SkillsCommands, slack_api: FakeSlackApi
) -> None:
    await skills.handle_command(command("skills frobnicate now"))

    (ephemeral,) = slack_api.state.ephemerals
    assert ephemeral["text"] == USAGE
