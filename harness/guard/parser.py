"""tree-sitter-bash parsing under the analysis budget.

A ``tree_sitter.Parser`` is not safe to share between threads (the guard runs in a
worker thread per Bash call), so each thread keeps its own. tree-sitter calls the
progress callback now and then while it parses (py-tree-sitter ≥ 0.25, only when the
text is read through a callback); returning True cancels the parse, which the parser
reports as ``ValueError`` and this module as ``ParseTimeout``. A node of a tree parsed
through a callback reads its text through the callback too, so chunks are small (the
cost of ``node.text`` follows the node's length, not the command's), and text up to
``WATCHED_BYTES`` (which tree-sitter parses in 0.2 s at worst) is parsed directly.
"""

from __future__ import annotations

import threading

import tree_sitter
import tree_sitter_bash

from harness.guard.budget import Budget

WATCHED_BYTES = 2048
"""Text longer than this (UTF-8 bytes) is parsed under the budget's deadline."""

_CHUNK_BYTES = 512
_local = threading.local()


class ParseTimeout(Exception):
    """tree-sitter did not finish within the analysis budget."""


def _parser() -> tree_sitter.Parser:
    parser: tree_sitter.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
        _local.parser = parser
    return parser


def parse(text: str, budget: Budget) -> tree_sitter.Tree:
    """Parse bash ``text``; raise ``ParseTimeout`` when ``budget`` runs out of time."""
    data = text.encode("utf-8", "surrogateescape")
    parser = _parser()
    if len(data) <= WATCHED_BYTES:
        return parser.parse(data)

    def read(offset: int, _point: tuple[int, int]) -> bytes:
        return data[offset : offset + _CHUNK_BYTES]

    def progress(_offset: int, _has_error: bool) -> bool:
        return budget.out_of_time()

    try:
        return parser.parse(read, progress_callback=progress)
    except ValueError as exc:
        parser.reset()
        raise ParseTimeout from exc
