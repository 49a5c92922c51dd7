"""Prompt assembly as the model receives it (docs/architecture.md §4).

The session is stepped with ``advance`` against the fake Messages API, and the
assertions read the request bodies the fake recorded: the frozen first message
(skill, memory and incident-notes indexes, the requester, then the request), and
the static system prompt and tools.
"""

from __future__ import annotations

import doctest
import itertools
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from harness import Inbound, Requester, tool_specs
from harness.loop import budget, prompt
from harness.loop.prompt import SYSTEM_PROMPT, FrozenContext, frozen_context, skill_lines
from memory_store import FileStore, IndexEntry, Namespace, Origin, Scope
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply
from tests.harness.step_support import (
    CHANNEL,
    ORG,
    Kit,
    open_kit,
    prefix_stable,
    static_prefix,
    texts_of,
)

HUMAN = Origin("U-CAROL")
SKILLS = Namespace(ORG, Scope.SKILLS)
MEMORY = Namespace(ORG, Scope.MEMORY)
INCIDENT = Namespace(ORG, Scope.INCIDENT, CHANNEL)
ELSEWHERE = Namespace(ORG, Scope.INCIDENT, "C-OTHER-INCIDENT")
SKILL = (
    "---\nname: kubectl-debug\ndescription: Debug crashlooping pods (events, logs, "
    "last deploy). Use when pods restart.\n---\n# Steps\n1. kubectl get pods\n"
)
UPDATED = r"\(updated \d{4}-\d\d-\d\d \d\d:\d\d UTC\)"


@pytest.fixture
async def kit(tmp_path: Path) -> AsyncIterator[Kit]:
    async with open_kit(tmp_path) as shared:
        yield shared


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI() as server:
        yield server


async def seed_org(store: FileStore) -> None:
    await store.write(SKILLS, "/kubectl-debug/SKILL.md", SKILL, HUMAN, expected_version=0)
    await store.write(SKILLS, "/kubectl-debug/extra.md", "More notes\n", HUMAN, expected_version=0)
    await store.write(
        MEMORY, "/teams.md", "Team X deploys from the release branch\n", HUMAN, expected_version=0
    )
    await store.write(INCIDENT, "/timeline.md", "14:02 first 500s\n", HUMAN, expected_version=0)
    await store.write(ELSEWHERE, "/secret.md", "another incident\n", HUMAN, expected_version=0)


def ask(text: str, user: str = "U-ALICE", name: str = "Alice") -> tuple[Inbound, ...]:
    return (Inbound(user, text, name),)


async def test_the_first_message_carries_the_frozen_indexes_and_requester_then_the_request(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: an org with a skill (and a file of its folder), memory and incident notes
    await seed_org(kit.store)
    fake.push(Reply.text("On it."))
    run = kit.session(fake.base_url)

    # When: Alice starts a session
    await run.run(ask("checkout-api returns 500s since 14:02"))

    # Then: the first message is the frozen context, then the request, nothing else
    first = fake.requests[0].messages[0]
    assert first["role"] == "user"
    context, request = texts_of(first)
    assert request == "checkout-api returns 500s since 14:02"
    assert "cache_control" in first["content"][-1]  # the frozen prefix is a breakpoint
    lines = context.split("\n")
    assert lines[0] == "<system-reminder>"
    assert lines[-1] == "</system-reminder>"
    assert lines[1:4] == [
        "Skills available (load one with the Skill tool when it applies):",
        "- kubectl-debug: Debug crashlooping pods (events, logs, last deploy). Use when pods "
        "restart.",
        "",
    ]
    assert lines[4] == "Org memory (/memory/):"
    assert re.fullmatch(
        rf"- /memory/teams\.md {UPDATED}: Team X deploys from the release branch", lines[5]
    )
    assert lines[7] == f"Notes of this incident (channel {CHANNEL}, /incident/):"
    assert re.fullmatch(rf"- /incident/timeline\.md {UPDATED}: 14:02 first 500s", lines[8])
    assert lines[10] == "This session was started by Alice."
    assert "extra.md" not in context  # a skill's extra files are not skills
    assert "another incident" not in context  # another channel's notes are not this incident's


async def test_an_empty_org_gets_placeholders_and_a_requester_without_a_name_is_a_mention(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    fake.push(Reply.text("Nothing to go on yet."))
    run = kit.session(fake.base_url)
    run.cp = replace(run.cp, requester=Requester("U-DAVE"))

    await run.run(ask("help", user="U-DAVE", name=""))

    context = texts_of(fake.requests[0].messages[0])[0]
    assert "- (no skills yet)" not in context
    assert "\n(no skills yet)\n" in context
    assert "\n(empty)\n" in context
    assert "\n(no notes yet)\n" in context
    assert context.endswith("\n\nThis session was started by <@U-DAVE>.\n</system-reminder>")


async def test_system_prompt_and_tools_are_the_same_bytes_in_every_request(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: a session over two turns with tool calls in between
    await seed_org(kit.store)
    fake.push(
        Reply.tool("Read", {"file_path": "/memory/teams.md"}),
        Reply.tool("Grep", {"pattern": "500", "path": "/incident"}),
        Reply.text("Team X deploys from the release branch."),
        Reply.text("Yes, the release branch."),
    )
    run = kit.session(fake.base_url)

    # When: it runs, and a teammate asks a follow-up
    await run.run(ask("who deploys checkout?"))
    await run.run(ask("sure?", "U-BOB", "Bob"))

    # Then: system and tools are byte-identical, system first-breakpoint included
    requests = fake.requests
    assert len(requests) == 4
    assert len({static_prefix(r) for r in requests}) == 1
    body = requests[0].body
    assert body["system"] == [
        {"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}
    ]
    assert [t["name"] for t in body["tools"]] == [s.name for s in tool_specs()]
    assert all("cache_control" not in t for t in body["tools"])
    assert all(prefix_stable(a, b) for a, b in itertools.pairwise(requests))


async def test_a_skill_added_later_is_announced_as_an_addition_and_the_index_is_not_rewritten(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: a session that answered once
    await seed_org(kit.store)
    fake.push(Reply.text("First answer."), Reply.text("Second answer."))
    run = kit.session(fake.base_url)
    await run.run(ask("checkout is down"))

    # When: a human adds a skill, and a teammate replies
    skill = SKILL.replace("kubectl-debug", "db-pool").replace("crashlooping pods", "DB pools")
    await kit.store.write(SKILLS, "/db-pool/SKILL.md", skill, HUMAN, expected_version=0)
    await run.run(ask("what about the DB?", "U-BOB", "Bob"))

    # Then: the first message is unchanged and the addition is new content at the end
    first, second = fake.requests
    assert prefix_stable(first, second)
    assert texts_of(second.messages[0]) == texts_of(first.messages[0])
    announcement, reply = texts_of(second.messages[-1])
    assert announcement == (
        "<system-reminder>\nNew shared files were added by others since you started:\n"
        "- /skills/db-pool/SKILL.md: Debug DB pools (events, logs, last deploy). Use when pods "
        "restart.\n</system-reminder>"
    )
    assert reply == "Message from Bob in the incident thread:\nwhat about the DB?"


def test_the_frozen_context_of_a_large_org_stays_within_32_kb() -> None:
    # Given: 500 skills with long descriptions and 5,000 memory files
    at = datetime(2026, 12, 1, tzinfo=UTC)
    skills = [
        IndexEntry(f"/skill-{i:03d}/SKILL.md", f"Runbook {i}. " * 40, 1, at) for i in range(500)
    ]
    memory = [IndexEntry(f"/team/service-{i}.md", f"Facts {i}. " * 20, 1, at) for i in range(5000)]

    # When: the first message's context is built
    text = frozen_context(FrozenContext(skills, memory, [], "alice", "C1"))

    # Then: under 32 KB, every skill named, and the model told how to find the rest
    assert len(text.encode()) <= 32 * 1024
    assert all(f"- skill-{i:03d}" in text for i in range(500))
    assert "more files not listed here: use Glob" in text


def test_skills_only_users_may_invoke_are_not_offered_to_the_model() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    entries = [
        IndexEntry("/deploy/SKILL.md", "Deploy to production.", 1, at, listed=False),
        IndexEntry("/pods/SKILL.md", "Restart pods — when to use: pods flap", 1, at),
    ]

    assert skill_lines(entries) == ["- pods: Restart pods — when to use: pods flap"]


def test_descriptions_are_cut_before_names_are_dropped() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    entries = [IndexEntry(f"/s{i}/SKILL.md", "d" * 1000, 1, at) for i in range(20)]

    lines = skill_lines(entries, max_bytes=4000)

    assert [line.split(":")[0] for line in lines] == [f"- s{i}" for i in range(20)]
    assert all(line.endswith("…") for line in lines)
    assert sum(len(line) + 1 for line in lines) <= 4000


@pytest.mark.parametrize("module", [budget, prompt], ids=str)
def test_budget_and_prompt_doctests_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)

    assert (result.failed, result.attempted > 0) == (0, True)
