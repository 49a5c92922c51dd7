"""YAML frontmatter: the ``---`` block at the top of a Markdown file.

Pure functions. Used to validate ``SKILL.md`` files and to describe files for the
prompt's indexes (``summary``). Format as in Claude Code skill files: the file starts with a line
``---``, then YAML, then a line ``---``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml


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


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: where in the file (line and column, 1-based) and what PyYAML found, without
    its multi-line excerpt."""
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        # +2: the mark is 0-based and the YAML starts on the file's second line.
        context = getattr(exc, "context", None)
        what = f"{exc.problem} ({context})" if context else exc.problem  # type: ignore[attr-defined]
        return f"line {mark.line + 2}, column {mark.column + 1} of the file: {what}"
    if isinstance(exc, yaml.reader.ReaderError):
        return f"character {exc.position + 1} of the frontmatter: {exc.reason}"
    return " ".join(str(exc).split())
