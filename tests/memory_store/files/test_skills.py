"""SKILL.md validation: the pure check, and the store refusing bad skills."""

from __future__ import annotations

import pytest

from memory_store import FileNotFound, FileStore, InvalidSkill, Namespace, validate_skill
from tests.memory_store.file_support import who

GOOD = "---\nname: restart-pods\ndescription: Restart crashlooping pods safely.\n---\n# Steps\n"


def problems_of(path: str, content: str) -> list[str]:
    with pytest.raises(InvalidSkill) as caught:
        validate_skill(path, content)
    assert caught.value.path == path
    return caught.value.problems


def test_a_well_formed_skill_passes() -> None:
    validate_skill("/restart-pods/SKILL.md", GOOD)


def test_files_other_than_a_skill_md_are_not_checked() -> None:
    for path in ("/restart-pods/notes.md", "/restart-pods/scripts/run.sh"):
        validate_skill(path, "---\nnot: [closed")


@pytest.mark.parametrize(
    ("content"),
    [
        "# Restart pods\n\nSteps to restart crashlooping pods.\n",
        "---\ndescription: Restart pods.\n---\n# Steps\n",
        "---\nname: restart-pods\n---\nRestart pods.\n",
        "---\nname: pods-restart\ndescription: Restart pods.\n---\n",
        "---\nname: Restart Pods\ndescription: Restart pods.\n---\n",
        f"---\nname: restart-pods\ndescription: {'d' * 1068}\n---\n",
    ],
    ids=["no-frontmatter", "no-name", "no-description", "other-name", "display-name", "long"],
)
def test_skills_claude_code_accepts_are_accepted(content: str) -> None:
    validate_skill("/restart-pods/SKILL.md", content)


def test_a_skill_with_unclosed_frontmatter_is_told_to_close_it() -> None:
    (problem,) = problems_of("/restart-pods/SKILL.md", "---\nname: restart-pods\n")

    assert "not closed" in problem
    assert "name: restart-pods" in problem


def test_a_skill_with_broken_yaml_is_told_where() -> None:
    (problem,) = problems_of("/x/SKILL.md", "---\nname: [x\ndescription: d\n---\n")

    assert "not valid YAML" in problem
    assert "line" in problem


def test_fields_that_are_not_text_are_refused() -> None:
    problems = problems_of("/x/SKILL.md", "---\nname: 42\ndescription: [a, b]\n---\n")

    assert problems == [
        "'name' must be text; write 'name: …' on one line",
        "'description' must be text; write 'description: …' on one line",
    ]


@pytest.mark.parametrize(
    ("path", "advice"),
    [
        ("/ops/restart/SKILL.md", "write /restart/SKILL.md (category sub-folders are never"),
        ("/restart/skill.md", "name the file SKILL.md (upper case)"),
        ("/SKILL.md", "a skill lives in a folder"),
    ],
)
def test_a_skill_file_that_would_never_be_listed_is_refused_with_advice(
    path: str, advice: str
) -> None:
    (problem,) = problems_of(path, GOOD)

    assert advice in problem


async def test_the_store_refuses_a_skill_it_would_never_list_and_keeps_nothing(
    store: FileStore, skills: Namespace
) -> None:
    with pytest.raises(InvalidSkill):
        await store.write(skills, "/ops/restart/SKILL.md", GOOD, who(), expected_version=0)

    with pytest.raises(FileNotFound):
        await store.read(skills, "/ops/restart/SKILL.md")


async def test_the_store_refuses_an_edit_that_breaks_a_skill(
    store: FileStore, skills: Namespace
) -> None:
    await store.write(skills, "/restart-pods/SKILL.md", GOOD, who(), expected_version=0)

    with pytest.raises(InvalidSkill):
        await store.edit(skills, "/restart-pods/SKILL.md", "name: restart-pods", "name: [x", who())

    assert (await store.read(skills, "/restart-pods/SKILL.md")).content == GOOD


async def test_skill_rules_apply_only_in_the_skills_scope(
    store: FileStore, memory: Namespace
) -> None:
    result = await store.write(memory, "/restart/SKILL.md", "anything", who(), expected_version=0)

    assert result.created


async def test_the_skill_index_uses_descriptions(store: FileStore, skills: Namespace) -> None:
    await store.write(skills, "/restart-pods/SKILL.md", GOOD, who(), expected_version=0)
    await store.write(
        skills, "/restart-pods/kubectl.md", "# kubectl tips\n", who(), expected_version=0
    )

    index = await store.index(skills)

    assert [(e.path, e.summary) for e in index] == [
        ("/restart-pods/SKILL.md", "Restart crashlooping pods safely."),
        ("/restart-pods/kubectl.md", "# kubectl tips"),
    ]


async def test_the_skill_index_lists_when_to_use_and_hides_user_only_skills(
    store: FileStore, skills: Namespace
) -> None:
    deploy = "---\ndescription: Deploy.\nwhen_to_use: a release is due\n"
    deploy += "disable-model-invocation: true\n---\n"
    await store.write(skills, "/deploy/SKILL.md", deploy, who(), expected_version=0)
    await store.write(
        skills, "/pods/SKILL.md", "# Pods\nRestart them.\n", who(), expected_version=0
    )

    index = await store.index(skills)

    assert [(e.path, e.summary, e.listed) for e in index] == [
        ("/deploy/SKILL.md", "Deploy. — when to use: a release is due", False),
        ("/pods/SKILL.md", "# Pods Restart them.", True),
    ]
