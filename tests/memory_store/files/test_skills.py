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


def test_files_other_than_a_folder_skill_md_are_not_checked() -> None:
    for path in ("/restart-pods/notes.md", "/SKILL.md", "/a/b/SKILL.md", "/x/skill.md"):
        validate_skill(path, "no frontmatter at all")


def test_a_skill_without_frontmatter_is_told_how_it_starts() -> None:
    (problem,) = problems_of("/restart-pods/SKILL.md", "# Steps\n")

    assert "start with a line '---'" in problem
    assert "name: restart-pods" in problem


def test_a_skill_with_unclosed_frontmatter_is_told_to_close_it() -> None:
    (problem,) = problems_of("/restart-pods/SKILL.md", "---\nname: restart-pods\n")

    assert "not closed" in problem


def test_a_skill_with_broken_yaml_is_told_where() -> None:
    (problem,) = problems_of("/x/SKILL.md", "---\nname: [x\ndescription: d\n---\n")

    assert "not valid YAML" in problem
    assert "line" in problem


def test_a_skill_missing_name_and_description_gets_both_problems() -> None:
    problems = problems_of("/restart-pods/SKILL.md", "---\ntitle: x\n---\n")

    assert problems == [
        "add a 'name: restart-pods' line to the frontmatter",
        "add a 'description:' line saying what the skill does and when to use it",
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Restart-Pods", "lowercase letters, digits and single hyphens"),
        ("restart--pods", "single hyphens"),
        ("-restart", "not at the start or end"),
        ("restart_pods", "single hyphens"),
        ("a" * 65, "1 to 64 characters (it is 65)"),
    ],
)
def test_a_malformed_name_is_refused_with_the_rule(name: str, expected: str) -> None:
    content = f"---\nname: {name}\ndescription: d\n---\n"

    problems = problems_of(f"/{name}/SKILL.md", content)

    assert any(expected in problem for problem in problems)


def test_a_name_that_differs_from_its_folder_is_refused() -> None:
    problems = problems_of("/restart/SKILL.md", GOOD)

    assert problems == [
        "'name' 'restart-pods' must equal the folder name 'restart': rename one so that they match"
    ]


def test_a_name_that_is_not_text_is_refused() -> None:
    assert problems_of("/x/SKILL.md", "---\nname: 42\ndescription: d\n---\n") == [
        "'name' must be text; write 'name: x'"
    ]


def test_an_empty_or_too_long_description_is_refused() -> None:
    empty = problems_of("/x/SKILL.md", "---\nname: x\ndescription: ''\n---\n")
    long = problems_of("/x/SKILL.md", f"---\nname: x\ndescription: {'d' * 1025}\n---\n")

    assert "non-empty" in empty[0]
    assert long == ["'description' is 1025 characters; shorten it to at most 1024"]


def test_a_description_of_exactly_1024_chars_and_a_64_char_name_pass() -> None:
    name = "a" * 64
    validate_skill(f"/{name}/SKILL.md", f"---\nname: {name}\ndescription: {'d' * 1024}\n---\n")


async def test_the_store_refuses_a_bad_skill_and_keeps_nothing(
    store: FileStore, skills: Namespace
) -> None:
    with pytest.raises(InvalidSkill):
        await store.write(skills, "/restart/SKILL.md", GOOD, who(), expected_version=0)

    with pytest.raises(FileNotFound):
        await store.read(skills, "/restart/SKILL.md")


async def test_the_store_refuses_an_edit_that_breaks_a_skill(
    store: FileStore, skills: Namespace
) -> None:
    await store.write(skills, "/restart-pods/SKILL.md", GOOD, who(), expected_version=0)

    with pytest.raises(InvalidSkill):
        await store.edit(skills, "/restart-pods/SKILL.md", "name: restart-pods", "name: x", who())

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
