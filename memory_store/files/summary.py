"""The one-line description of a file that the prompt's indexes show (pure).

Computed once, when a version is written, and kept in ``files.summary`` so that the
indexes are built from paths, versions and summaries without reading contents.

A skill's ``/<folder>/SKILL.md`` is described as Claude Code describes a skill: its
frontmatter ``description`` (else the first paragraph of the body), followed by
``when_to_use`` when present, at most 1,536 characters together (Claude Code's cap on
a skill's listing entry); ``disable-model-invocation: true`` keeps it out of the
model's listing. Any other file: its frontmatter ``description``, else its first
non-empty line, at most 200 characters.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from memory_store.files import frontmatter
from memory_store.files.skills import is_skill_file

MAX_SUMMARY_CHARS = 200
MAX_SKILL_LISTING_CHARS = 1536
SKILLS_SCOPE = "skills"


@dataclass(frozen=True)
class Description:
    """``summary``: one line, whitespace runs collapsed; ``listed``: offered to the model."""

    summary: str
    listed: bool = True


def describe(scope: str, path: str, content: str) -> Description:
    """The description of ``content`` stored at ``path`` in ``scope`` (a ``Scope`` value).

    >>> describe("memory", "/a.md", "\\n  # Payments deploy from release\\nmore").summary
    '# Payments deploy from release'
    >>> describe("skills", "/x/SKILL.md", "---\\ndescription: Restart\\nwhen_to_use: pods stuck\\n"
    ...          "disable-model-invocation: true\\n---\\nbody").summary
    'Restart — when to use: pods stuck'
    >>> describe("skills", "/x/SKILL.md", "# Pods\\n\\nRestart them.").summary
    '# Pods'
    """
    fields: dict[str, object] = {}
    body = content
    if content.removeprefix("\ufeff").startswith("---"):  # else parse would refuse it
        try:
            front = frontmatter.parse(content)
        except frontmatter.FrontmatterError:
            pass
        else:
            fields, body = front.fields, front.body
    if scope == SKILLS_SCOPE and is_skill_file(path):
        return _skill(fields, body)
    description = fields.get("description")
    if isinstance(description, str) and description.strip():
        return Description(one_line(description)[:MAX_SUMMARY_CHARS])
    return Description(one_line(_first_line(body))[:MAX_SUMMARY_CHARS])


def _first_line(body: str) -> str:
    """The first non-empty line of ``body`` ("" when none): ``_first_paragraph(body,
    lines=1)`` without its generator, for every write's summary."""
    start = 0
    while (end := body.find("\n", start)) != -1:
        line = body[start:end]
        if line.strip():
            return line
        start = end + 1
    line = body[start:]
    return line if line.strip() else ""


def _skill(fields: dict[str, object], body: str) -> Description:
    description = fields.get("description")
    text = description if isinstance(description, str) else ""
    text = one_line(text) or one_line(_first_paragraph(body))
    when = fields.get("when_to_use")
    if isinstance(when, str) and when.strip():
        text = f"{text} — when to use: {one_line(when)}" if text else one_line(when)
    listed = fields.get("disable-model-invocation") is not True
    return Description(cut(text, MAX_SKILL_LISTING_CHARS), listed)


def _first_paragraph(body: str, *, lines: int = 1_000) -> str:
    """The first run of non-empty lines (at most ``lines`` of them); reads ``body`` only
    as far as that run."""
    found: list[str] = []
    for line in _lines(body):
        if line.strip():
            found.append(line)
            if len(found) == lines:
                break
        elif found:
            break
    return " ".join(found)


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text`` (split at ``\\n``), one at a time."""
    start = 0
    while (end := text.find("\n", start)) != -1:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def one_line(text: str) -> str:
    """``text`` with every whitespace run made one space."""
    return " ".join(text.split())


def cut(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, ending with ``…`` when cut.

    >>> cut("abcdef", 4), cut("abc", 4)
    ('abc…', 'abc')
    """
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
