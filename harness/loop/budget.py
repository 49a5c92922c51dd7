"""Fitting an index (names with one-line descriptions) into a byte budget (pure).

As Claude Code does with its skill listing: every entry with its whole description
when that fits; else descriptions cut to one length for all; else the first entries
keep a short description and the rest are named only; else as many names as fit and a
last line saying how many more there are and how to find them (Glob). Sizes are UTF-8
bytes, newlines included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MIN_DESCRIPTION_CHARS = 60


@dataclass(frozen=True)
class Item:
    """One index entry: ``name`` (always shown when the entry is) and its ``description``."""

    name: str
    description: str = ""


def _size(text: str) -> int:
    return len(text.encode()) + 1  # its newline


def _line(item: Item, max_chars: int | None) -> str:
    text = item.description
    if max_chars is not None and len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return f"- {item.name}: {text}" if text else f"- {item.name}"


def fit(items: Sequence[Item], max_bytes: int, more: str) -> list[str]:
    """The lines of ``items`` within ``max_bytes`` (see the module docstring).

    Args:
        more: the last line when entries are left out; ``{n}`` is replaced by how many.

    >>> fit([Item("a", "first"), Item("b", "second")], 100, "{n} more")
    ['- a: first', '- b: second']
    >>> [len(line) for line in fit([Item("a", "x" * 200), Item("b", "y" * 200)], 110, "")]
    [65, 3]
    >>> fit([Item(str(i)) for i in range(100)], 30, "{n} more")
    ['- 0', '- 1', '- 2', '- 3', '- 4', '95 more']
    """
    full = [_line(item, None) for item in items]
    if sum(map(_size, full)) <= max_bytes:
        return full
    cap = _widest_cap(items, max_bytes)
    if cap is not None:
        return [_line(item, cap) for item in items]
    names = [_line(Item(item.name), None) for item in items]
    room = max_bytes - sum(map(_size, names))
    if room >= 0:
        return _some_described(items, names, room)
    return _some_named(names, max_bytes, more)


def _widest_cap(items: Sequence[Item], max_bytes: int) -> int | None:
    """The largest description length (≥ MIN_DESCRIPTION_CHARS) at which all fit."""
    low, high = MIN_DESCRIPTION_CHARS, max((len(i.description) for i in items), default=0)
    if sum(_size(_line(i, low)) for i in items) > max_bytes:
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if sum(_size(_line(i, middle)) for i in items) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return low


def _some_described(items: Sequence[Item], names: list[str], room: int) -> list[str]:
    lines = list(names)
    for i, item in enumerate(items):
        described = _line(item, MIN_DESCRIPTION_CHARS)
        extra = _size(described) - _size(names[i])
        if extra > room:
            break
        lines[i], room = described, room - extra
    return lines


def _some_named(names: list[str], max_bytes: int, more: str) -> list[str]:
    room = max_bytes - _size(more.format(n=len(names)))
    shown: list[str] = []
    for name in names:
        if _size(name) > room:
            break
        shown.append(name)
        room -= _size(name)
    return [*shown, more.format(n=len(names) - len(shown))]
