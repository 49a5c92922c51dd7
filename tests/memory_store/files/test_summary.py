"""A file's one-line summary: the first non-empty line, found without walking the body
as a paragraph (every write computes it)."""

from __future__ import annotations

import random

from memory_store.files.summary import _first_line, _first_paragraph, describe

PIECES = ["a", " ", "\n", "\t", "\r", "b c", "\u00a0", "\u2028", "", "# T"]


def test_the_first_line_is_the_first_paragraphs_first_line_for_any_text() -> None:
    rng = random.Random(31)
    texts = ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14))) for _ in range(20_000)]
    differ = [t for t in texts if _first_line(t) != _first_paragraph(t, lines=1)]
    assert differ == []


def test_a_summary_skips_blank_lines_and_collapses_whitespace() -> None:
    assert describe("incident", "/n.md", "\n \t\n  db   primary  down \nmore").summary == (
        "db primary down"
    )
    assert describe("incident", "/n.md", " \n\t\n").summary == ""
    assert describe("incident", "/n.md", "last line, no newline").summary == (
        "last line, no newline"
    )
