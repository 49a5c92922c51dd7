"""The command table: which handler knows the argument roles of a program.

Lookup is by the program's base name (``/usr/bin/grep`` → ``grep``). A program not in
the table gets ``bash_generic.unknown_program``: every operand is a possible path.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from harness.guard.invocation import Invocation
from harness.guard.programs.files import file_handlers
from harness.guard.programs.generic import unknown_program
from harness.guard.programs.interpreters import interpreter_handlers
from harness.guard.programs.network import network_handlers
from harness.guard.programs.ops import ops_handlers
from harness.guard.programs.search import search_handlers
from harness.guard.programs.wrappers import wrapper_handlers

Handler = Callable[[Invocation], None]


@cache
def _table() -> dict[str, Handler]:
    table: dict[str, Handler] = {}
    for part in (
        file_handlers(),
        search_handlers(),
        wrapper_handlers(),
        interpreter_handlers(),
        network_handlers(),
        ops_handlers(),
    ):
        table.update(part)
    return table


def handler_for(name: str) -> Handler:
    """The handler for program ``name`` (a base name); ``unknown_program`` when unknown."""
    return _table().get(name, unknown_program)
