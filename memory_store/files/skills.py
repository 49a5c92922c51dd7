"""Validation of skill files: ``/<name>/SKILL.md`` under the skills scope.

The format is Claude Code's skill folder (see docs/architecture.md §6): YAML frontmatter
with ``name`` (lowercase letters, digits and single hyphens, 1–64 chars, equal to the
folder) and ``description`` (present, ≤ 1,024 chars).
"""

from __future__ import annotations

import re

from memory_store.errors import InvalidSkill
from memory_store.files import frontmatter

SKILL_FILE = "SKILL.md"
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_EXAMPLE = "---\nname: restart-pods\ndescription: What it does and when to use it.\n---"


def is_skill_file(path: str) -> bool:
    """True for a normalised path of the form ``/<folder>/SKILL.md``.

    >>> is_skill_file("/restart-pods/SKILL.md"), is_skill_file("/restart-pods/notes.md")
    (True, False)
    """
    parts = path.split("/")
    return len(parts) == 3 and parts[2] == SKILL_FILE


def validate_skill(path: str, content: str) -> None:
    """Check the frontmatter of a ``/<folder>/SKILL.md``; other paths pass unchecked.

    Args:
        path: normalised path within the skills scope.
        content: the whole file.

    Raises:
        InvalidSkill: ``problems`` lists each thing to fix, in words a model can act on.
    """
    if not is_skill_file(path):
        return
    try:
        fields = frontmatter.parse(content).fields
    except frontmatter.FrontmatterError as exc:
        raise InvalidSkill(path, [f"{exc}; a SKILL.md starts like:\n{_EXAMPLE}"]) from exc
    problems = _name_problems(fields.get("name"), folder=path.split("/")[1])
    problems += _description_problems(fields.get("description"))
    if problems:
        raise InvalidSkill(path, problems)


def _name_problems(name: object, *, folder: str) -> list[str]:
    if name is None:
        return [f"add a 'name: {folder}' line to the frontmatter"]
    if not isinstance(name, str):
        return [f"'name' must be text; write 'name: {folder}'"]
    problems = []
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        problems.append(f"'name' must be 1 to {MAX_NAME_CHARS} characters (it is {len(name)})")
    if not _NAME.fullmatch(name):
        problems.append(
            f"'name' {name!r} may use only lowercase letters, digits and single hyphens,"
            " not at the start or end (e.g. 'restart-pods')"
        )
    if name != folder:
        problems.append(
            f"'name' {name!r} must equal the folder name {folder!r}: rename one so that they match"
        )
    return problems


def _description_problems(description: object) -> list[str]:
    if description is None:
        return ["add a 'description:' line saying what the skill does and when to use it"]
    if not isinstance(description, str) or not description.strip():
        return [
            "'description' must be non-empty text saying what the skill does and when to use it"
        ]
    if len(description) > MAX_DESCRIPTION_CHARS:
        return [
            f"'description' is {len(description)} characters; shorten it to at most"
            f" {MAX_DESCRIPTION_CHARS}"
        ]
    return []
