"""Validation of skill files: ``/<folder>/SKILL.md`` under the skills scope.

The format is Claude Code's skill folder (ARCHITECTURE.md §6), accepted as Claude Code
accepts it: the YAML frontmatter is optional; ``name`` is optional (the folder name is
the skill's name) and may differ from the folder; ``description`` is optional (the
first paragraph of the body stands in) and has no length cap here (the listing cuts
it). What Claude Code would never load is refused, so that nothing is written that
the skill listing silently leaves out: a frontmatter block that is unterminated or not
a YAML mapping, and a file named ``SKILL.md`` (in any letter case) anywhere but directly
in a top-level folder (``/ops/x/SKILL.md``, ``/x/skill.md``, ``/SKILL.md``).
"""

from __future__ import annotations

from memory_store.errors import InvalidSkill
from memory_store.files import frontmatter

SKILL_FILE = "SKILL.md"
_EXAMPLE = "---\nname: restart-pods\ndescription: What it does and when to use it.\n---"


def is_skill_file(path: str) -> bool:
    """True for a normalised path of the form ``/<folder>/SKILL.md``.

    >>> is_skill_file("/restart-pods/SKILL.md"), is_skill_file("/restart-pods/notes.md")
    (True, False)
    """
    parts = path.split("/")
    return len(parts) == 3 and parts[2] == SKILL_FILE


def misplaced_skill_file(path: str) -> str | None:
    """Why a file named like ``SKILL.md`` at ``path`` would never be listed, or None.

    >>> misplaced_skill_file("/x/SKILL.md") is None, misplaced_skill_file("/x/notes.md") is None
    (True, True)
    >>> print(misplaced_skill_file("/ops/x/SKILL.md"))
    a skill is a top-level folder: write /x/SKILL.md (category sub-folders are never listed)
    """
    parts = path.split("/")
    if parts[-1].casefold() != SKILL_FILE.casefold() or is_skill_file(path):
        return None
    if len(parts) == 2:
        return f"a skill lives in a folder: write /<name>/{SKILL_FILE}"
    if len(parts) == 3:
        return (
            f"name the file {SKILL_FILE} (upper case), as Claude Code requires:"
            f" /{parts[1]}/{SKILL_FILE}"
        )
    return (
        f"a skill is a top-level folder: write /{parts[-2]}/{SKILL_FILE}"
        " (category sub-folders are never listed)"
    )


def validate_skill(path: str, content: str) -> None:
    """Check a file written in the skills scope (see the module docstring).

    Args:
        path: normalised path within the skills scope.
        content: the whole file.

    Raises:
        InvalidSkill: ``problems`` lists each thing to fix, in words a model can act on.
    """
    if (misplaced := misplaced_skill_file(path)) is not None:
        raise InvalidSkill(path, [misplaced])
    first_line = content.removeprefix("\ufeff").split("\n", 1)[0].rstrip("\r")
    if not is_skill_file(path) or first_line != "---":
        return
    try:
        fields = frontmatter.parse(content).fields
    except frontmatter.FrontmatterError as exc:
        raise InvalidSkill(path, [f"{exc}; a SKILL.md starts like:\n{_EXAMPLE}"]) from exc
    problems = [
        f"'{key}' must be text; write '{key}: …' on one line"
        for key in ("name", "description", "when_to_use")
        if key in fields and fields[key] is not None and not isinstance(fields[key], str)
    ]
    if problems:
        raise InvalidSkill(path, problems)
