"""Write and Edit on the virtual mounts: read-before-write, staleness, exact wording."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from harness import ReadRecord, run_tool
from memory_store import Namespace, Origin, Scope
from tests.harness.tool_support import (
    STATE_CURRENT,
    JailWorkspace,
    SessionDriver,
    error_text,
    open_store,
)

ORG = "T-WRITE"
HUMAN = Origin("U-HUMAN")
MEMORY = Namespace(ORG, Scope.MEMORY)
SKILLS = Namespace(ORG, Scope.SKILLS)
NOT_READ = "File has not been read yet. Read it first before writing to it."
MODIFIED = (
    "File has been modified since read, either by the user or by a linter. "
    "Read it again before attempting to write it."
)
SKILL = (
    "---\nname: deploys\ndescription: How to roll back a deploy. Use when a deploy broke.\n---\n"
)


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    async with open_store(None, tmp_path) as store:
        yield SessionDriver(store, JailWorkspace(tmp_path), org_id=ORG)


async def seed(agent: SessionDriver, path: str, content: str, ns: Namespace = MEMORY) -> None:
    await agent.store.write(ns, path, content, HUMAN, expected_version=None)


async def stored(agent: SessionDriver, path: str) -> str:
    return (await agent.store.read(MEMORY, path)).content


# ---------------------------------------------------------------- Write


async def test_write_creates_a_new_file_and_counts_as_a_full_read(agent: SessionDriver) -> None:
    outcome = await agent.call("Write", {"file_path": "/memory/new.md", "content": "hello\n"})

    assert outcome.content == "File created successfully at: /memory/new.md" + STATE_CURRENT
    assert await stored(agent, "/new.md") == "hello\n"
    assert agent.read_state["/memory/new.md"] == ReadRecord(1, full=True, notified_version=1)


async def test_write_refuses_an_existing_file_this_session_has_not_read(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/x.md", "theirs\n")

    outcome = await agent.call("Write", {"file_path": "/memory/x.md", "content": "mine\n"})

    assert error_text(outcome) == NOT_READ
    assert await stored(agent, "/x.md") == "theirs\n"


async def test_write_replaces_a_file_read_in_full(agent: SessionDriver) -> None:
    await seed(agent, "/x.md", "old\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})

    outcome = await agent.call("Write", {"file_path": "/memory/x.md", "content": "new\n"})

    assert outcome.content == "The file /memory/x.md has been updated successfully." + STATE_CURRENT
    assert await stored(agent, "/x.md") == "new\n"
    assert agent.read_state["/memory/x.md"] == ReadRecord(2, full=True, notified_version=2)


async def test_write_follows_a_read_of_part_of_the_file(agent: SessionDriver) -> None:
    # Claude Code 2.1.336: any Read lets Write replace the file
    await seed(agent, "/x.md", "a\nb\nc\n")
    await agent.call("Read", {"file_path": "/memory/x.md", "limit": 1})

    outcome = await agent.call("Write", {"file_path": "/memory/x.md", "content": "a\n"})

    assert not outcome.is_error, outcome.content
    assert await stored(agent, "/x.md") == "a\n"


async def test_write_refuses_a_file_changed_since_read_and_says_by_whom(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/x.md", "v1\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await agent.store.write(MEMORY, "/x.md", "v2\n", Origin("U2"), expected_version=1)

    outcome = await agent.call("Write", {"file_path": "/memory/x.md", "content": "mine\n"})

    assert error_text(outcome) == f"{MODIFIED} It is now at version 2, last changed by <@U2>."
    assert await stored(agent, "/x.md") == "v2\n"


async def test_write_says_when_the_file_was_deleted_since_read(agent: SessionDriver) -> None:
    await seed(agent, "/x.md", "v1\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await agent.store.delete(MEMORY, "/x.md", Origin("agent", "s-other", "toolu_del"))

    outcome = await agent.call("Write", {"file_path": "/memory/x.md", "content": "mine\n"})

    assert error_text(outcome) == (
        f"{MODIFIED} It has been deleted since by another agent session (s-other)."
    )


async def test_write_of_the_content_already_stored_succeeds_without_a_new_version(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/x.md", "same\n")

    outcome = await agent.call("Write", {"file_path": "/memory/x.md", "content": "same\n"})

    assert not outcome.is_error
    assert outcome.content == (
        "The file /memory/x.md has been updated successfully. (file state is current in your "
        "context \u2014 no need to Read it back)"
    )
    assert len(await agent.store.history(MEMORY, "/x.md")) == 1


async def test_a_retried_write_with_the_same_tool_use_id_is_a_no_op(agent: SessionDriver) -> None:
    # Given a Write whose result was lost (the worker died before the checkpoint commit)
    await seed(agent, "/x.md", "v1\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    before = dict(agent.read_state)
    first = await agent.call(
        "Write", {"file_path": "/memory/x.md", "content": "v2\n"}, tool_use_id="toolu_retry"
    )
    agent.read_state = before
    # When the same call runs again
    again = await agent.call(
        "Write", {"file_path": "/memory/x.md", "content": "v2\n"}, tool_use_id="toolu_retry"
    )
    # Then it reports the first result and made no second version
    assert (
        again.content
        == first.content
        == "The file /memory/x.md has been updated successfully." + STATE_CURRENT
    )
    assert [r.version for r in await agent.store.history(MEMORY, "/x.md")] == [1, 2]


async def test_write_under_skills_is_refused_unless_the_org_lets_agents_edit_skills(
    agent: SessionDriver,
) -> None:
    refused = await agent.call("Write", {"file_path": "/skills/deploys/SKILL.md", "content": SKILL})
    agent.agent_may_write_skills = True
    allowed = await agent.call("Write", {"file_path": "/skills/deploys/SKILL.md", "content": SKILL})

    assert error_text(refused) == (
        "Cannot write /skills/deploys/SKILL.md: in this org, skills are edited by people, not "
        "by the agent. Humans edit skills in Slack with `/agent skills`. If this playbook needs "
        "a change, say what to change in your answer, or record the lesson under /memory/."
    )
    assert (
        allowed.content == "File created successfully at: /skills/deploys/SKILL.md" + STATE_CURRENT
    )


async def test_reading_skills_is_always_allowed(agent: SessionDriver) -> None:
    await seed(agent, "/deploys/SKILL.md", SKILL, ns=SKILLS)

    outcome = await agent.call("Read", {"file_path": "/skills/deploys/SKILL.md"})

    assert outcome.content.startswith("1\t---\n2\tname: deploys\n")


async def test_an_invalid_skill_is_refused_with_what_to_fix(agent: SessionDriver) -> None:
    agent.agent_may_write_skills = True

    outcome = await agent.call(
        "Write", {"file_path": "/skills/bad/SKILL.md", "content": "---\nname: [bad\n---\n"}
    )

    text = error_text(outcome)
    assert text.startswith(
        "Invalid skill file /skills/bad/SKILL.md; nothing was written. Fix its YAML "
        "frontmatter:\n- "
    )


@pytest.mark.parametrize(
    ("path", "advice"),
    [
        ("/skills/ops/restart/SKILL.md", "write /restart/SKILL.md"),
        ("/skills/restart/skill.md", "name the file SKILL.md (upper case)"),
    ],
)
async def test_a_skill_that_would_never_be_listed_is_refused_not_written(
    agent: SessionDriver, path: str, advice: str
) -> None:
    agent.agent_may_write_skills = True

    outcome = await agent.call("Write", {"file_path": path, "content": SKILL})

    assert advice in error_text(outcome)
    assert await agent.store.index(SKILLS) == []


async def test_a_skill_without_frontmatter_is_written_and_listed(agent: SessionDriver) -> None:
    agent.agent_may_write_skills = True

    outcome = await agent.call(
        "Write", {"file_path": "/skills/restart/SKILL.md", "content": "# Restart\n\nSteps.\n"}
    )

    assert (
        outcome.content == "File created successfully at: /skills/restart/SKILL.md" + STATE_CURRENT
    )
    assert [(e.path, e.summary) for e in await agent.store.index(SKILLS)] == [
        ("/restart/SKILL.md", "# Restart")
    ]


async def test_a_file_over_the_size_cap_is_refused_with_sizes(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "Write", {"file_path": "/memory/big.md", "content": "x" * (100 * 1024 + 1)}
    )

    assert error_text(outcome) == (
        "File is too large: 102401 bytes, the limit is 102400 bytes. Keep shared files short, "
        "or split the content into several files."
    )


async def test_a_path_differing_only_by_case_is_refused_and_names_the_existing_one_in_full(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/Runbook.md", "x\n")

    outcome = await agent.call("Write", {"file_path": "/memory/runbook.md", "content": "y\n"})

    assert error_text(outcome) == (
        "Cannot use /memory/runbook.md: it differs only by letter case from the existing file "
        "/memory/Runbook.md. Use that path instead."
    )


async def test_write_to_a_mount_root_is_refused(agent: SessionDriver) -> None:
    outcome = await agent.call("Write", {"file_path": "/memory", "content": "x"})

    assert error_text(outcome) == "/memory is a directory; give the path of a file in it."


# ---------------------------------------------------------------- Edit


async def test_edit_with_identical_strings_says_no_changes_to_make(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "Edit", {"file_path": "/memory/missing.md", "old_string": "a", "new_string": "a"}
    )

    assert error_text(outcome) == (
        "No changes to make: old_string and new_string are exactly the same."
    )


async def test_edit_of_a_missing_file_says_file_does_not_exist(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "Edit", {"file_path": "/memory/missing.md", "old_string": "a", "new_string": "b"}
    )

    assert error_text(outcome) == (
        "File does not exist. Note: your current working directory is /workspace."
    )


async def test_edit_with_empty_old_string_creates_a_missing_file(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "Edit", {"file_path": "/memory/new.md", "old_string": "", "new_string": "fresh\n"}
    )

    assert outcome.content == (
        "The file /memory/new.md has been updated successfully. (file state is current in "
        "your context \u2014 no need to Read it back)"
    )
    assert await stored(agent, "/new.md") == "fresh\n"
    assert agent.read_state["/memory/new.md"].full


async def test_edit_with_empty_old_string_on_a_non_empty_file_is_refused(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/x.md", "content\n")

    outcome = await agent.call(
        "Edit", {"file_path": "/memory/x.md", "old_string": "", "new_string": "other"}
    )

    assert error_text(outcome) == "Cannot create new file - file already exists."


async def test_edit_refuses_a_file_this_session_has_not_read(agent: SessionDriver) -> None:
    await seed(agent, "/x.md", "a\n")

    outcome = await agent.call(
        "Edit", {"file_path": "/memory/x.md", "old_string": "a", "new_string": "b"}
    )

    assert error_text(outcome) == NOT_READ


async def test_edit_without_a_match_says_string_not_found_and_repeats_it(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/x.md", "a\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})

    outcome = await agent.call(
        "Edit", {"file_path": "/memory/x.md", "old_string": "zzz", "new_string": "b"}
    )

    assert error_text(outcome) == "String to replace not found in file.\nString: zzz"


async def test_edit_with_several_matches_asks_for_replace_all_or_more_context(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/x.md", "ok\nok\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})

    outcome = await agent.call(
        "Edit", {"file_path": "/memory/x.md", "old_string": "ok", "new_string": "fine"}
    )

    assert error_text(outcome) == (
        "Found 2 matches of the string to replace, but replace_all is false. To replace all "
        "occurrences, set replace_all to true. To replace only one occurrence, please provide "
        "more context to uniquely identify the instance.\nString: ok"
    )


async def test_edit_with_replace_all_replaces_every_occurrence(agent: SessionDriver) -> None:
    await seed(agent, "/x.md", "ok\nok\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})

    outcome = await agent.call(
        "Edit",
        {
            "file_path": "/memory/x.md",
            "old_string": "ok",
            "new_string": "fine",
            "replace_all": True,
        },
    )

    assert outcome.content == (
        "The file /memory/x.md has been updated. All occurrences were successfully replaced."
        "" + STATE_CURRENT
    )
    assert await stored(agent, "/x.md") == "fine\nfine\n"


async def test_edit_confirms_in_claude_codes_words(agent: SessionDriver) -> None:
    await seed(agent, "/x.md", "a\nb\nc\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})

    outcome = await agent.call(
        "Edit", {"file_path": "/memory/x.md", "old_string": "b", "new_string": "B"}
    )

    assert outcome.content == (
        "The file /memory/x.md has been updated successfully. (file state is current in your "
        "context \u2014 no need to Read it back)"
    )
    assert agent.read_state["/memory/x.md"] == ReadRecord(2, full=True, notified_version=2)


async def test_edit_applies_to_current_version_when_other_lines_changed(
    agent: SessionDriver,
) -> None:
    # Given this session read v1 and someone else then changed line 3
    await seed(agent, "/x.md", "one\ntwo\nthree\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await agent.store.write(MEMORY, "/x.md", "one\ntwo\nTHREE\n", Origin("U2"), expected_version=1)
    # When it edits line 1
    outcome = await agent.call(
        "Edit", {"file_path": "/memory/x.md", "old_string": "one", "new_string": "ONE"}
    )
    # Then both changes are kept and the model is told what the other change was
    assert await stored(agent, "/x.md") == "ONE\ntwo\nTHREE\n"
    assert outcome.content == (
        "The file /memory/x.md has been updated successfully. (note: the file had been "
        "modified on disk since you last read it \u2014 the edit applied cleanly, but the file "
        "contains other changes not in your context. Read it before edits that depend on "
        "surrounding content.)\n\n"
        "Another session changed this file after you read it; those changes are kept. Their "
        "changes, from the version you read (v1) to v2:\n"
        "@@ -1,3 +1,3 @@\n      1\tone\n      2\ttwo\n-     3\tthree\n+     3\tTHREE"
    )
    assert agent.read_state["/memory/x.md"] == ReadRecord(3, full=True, notified_version=3)


async def test_write_after_an_edit_over_someone_elses_change_proceeds(
    agent: SessionDriver,
) -> None:
    # Claude Code 2.1.336: the edit's note told the model; Write may follow
    await seed(agent, "/x.md", "one\ntwo\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await agent.store.write(MEMORY, "/x.md", "one\nTWO\n", Origin("U2"), expected_version=1)
    await agent.call("Edit", {"file_path": "/memory/x.md", "old_string": "one", "new_string": "1"})

    accepted = await agent.call("Write", {"file_path": "/memory/x.md", "content": "all new\n"})

    assert not accepted.is_error, accepted.content


async def test_edit_whose_match_vanished_in_a_concurrent_change_says_modified_since_read(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/x.md", "pool size 10\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await agent.store.write(MEMORY, "/x.md", "pool size 20\n", Origin("U2"), expected_version=1)

    outcome = await agent.call(
        "Edit", {"file_path": "/memory/x.md", "old_string": "size 10", "new_string": "size 15"}
    )

    assert error_text(outcome) == f"{MODIFIED} It is now at version 2."
    assert await stored(agent, "/x.md") == "pool size 20\n"


async def test_edit_after_a_partial_read_counts_as_seen(agent: SessionDriver) -> None:
    await seed(agent, "/x.md", "a\nb\nc\n")
    await agent.call("Read", {"file_path": "/memory/x.md", "limit": 1})

    await agent.call("Edit", {"file_path": "/memory/x.md", "old_string": "a", "new_string": "A"})

    assert agent.read_state["/memory/x.md"] == ReadRecord(2, full=True, notified_version=2)


async def test_edit_under_skills_is_refused_by_default(agent: SessionDriver) -> None:
    await seed(agent, "/deploys/SKILL.md", SKILL, ns=SKILLS)
    await agent.call("Read", {"file_path": "/skills/deploys/SKILL.md"})

    outcome = await agent.call(
        "Edit",
        {"file_path": "/skills/deploys/SKILL.md", "old_string": "roll", "new_string": "ROLL"},
    )

    assert error_text(outcome).startswith("Cannot write /skills/deploys/SKILL.md: in this org")


async def test_a_retried_edit_with_the_same_tool_use_id_is_not_applied_twice(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/x.md", "n=1\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    before = dict(agent.read_state)
    edit = {"file_path": "/memory/x.md", "old_string": "n=1", "new_string": "n=1\nn=1"}
    await agent.call("Edit", edit, tool_use_id="toolu_edit")
    agent.read_state = {k: replace(v) for k, v in before.items()}

    again = await agent.call("Edit", edit, tool_use_id="toolu_edit")

    assert not again.is_error
    assert await stored(agent, "/x.md") == "n=1\nn=1\n"


async def test_recovering_an_edit_after_a_crash_redoes_it_without_applying_it_twice(
    agent: SessionDriver,
) -> None:
    # Given an Edit that reached the store but whose result was never recorded
    await seed(agent, "/x.md", "count: 1\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    edit = {"file_path": "/memory/x.md", "old_string": "count: 1", "new_string": "count: 1\n+1"}
    committed = dict(agent.read_state)
    first = await agent.call("Edit", edit, tool_use_id="toolu_crash")
    agent.read_state = committed  # the crash lost the step's checkpoint
    # When the next worker recovers the call
    recovered = await run_tool("Edit", edit, agent.context("toolu_crash"), recovering=True)
    # Then it reports the edit once, as first done
    assert recovered is not None
    assert recovered.content == first.content
    assert await stored(agent, "/x.md") == "count: 1\n+1\n"
