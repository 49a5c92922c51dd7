"""Grep's content listing, built a file at a time, against the plain line-at-a-time form."""

from __future__ import annotations

import random

import pytest

from harness.tools.bounds import MAX_GREP_COLUMNS, grep_line
from harness.tools.search_output import NO_MATCHES, content_listing
from memory_store import FileMatches, grep_lines


def line_by_line(
    files: list[FileMatches],
    *,
    line_numbers: bool,
    context: bool,
    head_limit: int,
    offset: int,
    prefix: str,
) -> str:
    """The listing as ripgrep's format reads, one entry per line, then paged."""
    entries: list[str] = []
    previous = None
    for m in grep_lines(files):
        adjacent = previous is not None and (
            previous.path == m.path and m.line_number == previous.line_number + 1
        )
        if context and previous is not None and not adjacent:
            entries.append("--")
        sep = "-" if m.is_context else ":"
        text = grep_line(m.line, is_context=m.is_context)
        number = f"{m.line_number}{sep}" if line_numbers else ""
        entries.append(f"{prefix}{m.path}{sep}{number}{text}")
        previous = m
    if not entries:
        return NO_MATCHES
    rest = entries[offset:]
    shown = rest if head_limit == 0 else rest[:head_limit]
    notes = [f"limit: {head_limit}"] if len(shown) < len(rest) else []
    if offset:
        notes.append(f"offset: {offset}")
    body = "\n".join(shown) or ("No entries at this offset" if offset else NO_MATCHES)
    return body + (f"\n\n[Showing results with pagination = {', '.join(notes)}]" if notes else "")


def some_files(rng: random.Random, *, context: bool) -> list[FileMatches]:
    files = []
    for i in range(rng.randint(0, 5)):
        numbers = sorted(rng.sample(range(1, 40), rng.randint(1, 12)))
        lines = [
            "x" * (MAX_GREP_COLUMNS + 1) if rng.random() < 0.1 else f"text {n} of {i}"
            for n in numbers
        ]
        shown_as_context = {n for n in numbers if context and rng.random() < 0.4}
        files.append(FileMatches(f"/dir/f{i}.md", numbers, lines, frozenset(shown_as_context)))
    return files


@pytest.mark.parametrize("seed", range(40))
def test_the_listing_is_the_line_by_line_listing_for_every_page(seed: int) -> None:
    rng = random.Random(seed)
    for context in (False, True):
        files = some_files(rng, context=context)
        total = sum(len(f.line_numbers) for f in files) + 12
        for line_numbers in (True, False):
            for offset in (0, 1, 3, rng.randint(0, total), total + 5):
                for head_limit in (0, 1, 2, 5, rng.randint(1, total)):
                    ours, plain = (
                        listing(
                            files,
                            line_numbers=line_numbers,
                            context=context,
                            head_limit=head_limit,
                            offset=offset,
                            prefix="/memory",
                        )
                        for listing in (content_listing, line_by_line)
                    )
                    assert ours == plain, (files, line_numbers, context, head_limit, offset)


def test_numbers_far_apart_are_shown_as_they_are() -> None:
    far = [FileMatches("/big.log", [7, 2_000_000], ["a", "b"])]

    listing = content_listing(far, line_numbers=True, context=False, head_limit=0)

    assert listing == "/big.log:7:a\n/big.log:2000000:b"
