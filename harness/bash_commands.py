"""The command table: which handler knows the argument roles of a program.

Lookup is by the program's base name (``/usr/bin/grep`` → ``grep``). A program not in
the table gets ``bash_generic.unknown_program``: every operand is a possible path.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from .bash_file_tools import file_handlers
from .bash_generic import unknown_program
from .bash_interpreters import interpreter_handlers
from .bash_invocation import Invocation
from .bash_network_tools import network_handlers
from .bash_ops_tools import ops_handlers
from .bash_search_tools import search_handlers
from .bash_wrappers import wrapper_handlers

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
