"""YAML frontmatter: the ``---`` block at the top of a Markdown file.

Pure functions. Used to validate ``SKILL.md`` files and to summarise files for the
prompt's indexes. Format as in Claude Code skill files: the file starts with a line
``---``, then YAML, then a line ``---``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

MAX_SUMMARY_CHARS = 200
MAX_DESCRIPTION_SUMMARY_CHARS = 1024


class FrontmatterError(ValueError):
    """The frontmatter block is absent, unterminated, not YAML, or not a mapping."""


@dataclass(frozen=True)
class Frontmatter:
    """A parsed frontmatter block: ``fields`` (the YAML mapping) and the ``body`` after it."""

    fields: dict[str, Any]
    body: str


def parse(content: str) -> Frontmatter:
    """Split and parse the frontmatter at the top of ``content``.

    Raises:
        FrontmatterError: with a message that says what to fix.

    >>> parse("---\\nname: a\\n---\\nbody\\n").fields
    {'name': 'a'}
    """
    lines = content.removeprefix("\ufeff").split("\n")
    if not lines or lines[0].rstrip("\r") != "---":
        raise FrontmatterError("the file must start with a line '---' opening the YAML frontmatter")
    closing = [
        i for i, line in enumerate(lines[1:], start=1) if line.rstrip("\r") in ("---", "...")
    ]
    if not closing:
        raise FrontmatterError("the frontmatter is not closed: add a line '---' after it")
    end = closing[0]
    try:
        fields = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"the frontmatter is not valid YAML: {_yaml_problem(exc)}") from exc
    if not isinstance(fields, dict):
        raise FrontmatterError("the frontmatter must be YAML 'key: value' lines")
    return Frontmatter(fields=fields, body="\n".join(lines[end + 1 :]))


def summarise(content: str) -> str:
    """One line describing a file: its frontmatter ``description``, else its first text line.

    The description is cut to 1,024 chars, a first line to 200 chars; whitespace runs
    become one space. Empty string when the file has no text.

    >>> summarise("---\\ndescription: Restart the pods\\n---\\n# Pods\\n")
    'Restart the pods'
    >>> summarise("\\n\\n  # Payments team deploys from release\\nmore")
    '# Payments team deploys from release'
    """
    body = content
    try:
        front = parse(content)
    except FrontmatterError:
        pass
    else:
        description = front.fields.get("description")
        if isinstance(description, str) and description.strip():
            return _one_line(description)[:MAX_DESCRIPTION_SUMMARY_CHARS]
        body = front.body
    for line in body.split("\n"):
        if line.strip():
            return _one_line(line)[:MAX_SUMMARY_CHARS]
    return ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        # +2: the mark is 0-based and the YAML starts on the file's second line.
        return f"{exc.problem} (line {exc.problem_mark.line + 2} of the file)"
    return str(exc)
