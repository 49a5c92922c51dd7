"""What the person types into ``warroom chat``: messages from a line editor on a terminal,
or lines from a pipe.

On a terminal the terminal's own line editing (canonical mode) cuts a line at 4,095
characters without a word (termios(3), ``MAX_CANON``) and hands a pasted stack trace over
line by line, so each of its lines would become a message. The chat reads a terminal with
prompt_toolkit instead: the terminal is in raw mode, so a line has no length limit, and
bracketed paste (the terminal marks a paste with ``ESC [200~`` … ``ESC [201~``) inserts a
multi-line paste into the one message being typed; Enter sends it. While the prompt is
shown, what the chat prints goes above it (``patch_stdout``), so progress never tears
the line being typed. Ctrl-C raises SIGINT as the terminal would have, so it takes the
chat's one clean-up path (``bot.cli.signals``); Ctrl-D on an empty line ends the input.

The terminal stays in raw mode from before the banner (the sign that typing may start)
until the input ends: between two prompts and while a line is printed above the prompt
too (prompt_toolkit switches to canonical mode for each print, ``run_in_terminal``, and
back; ``_RawInput`` keeps it raw). A key typed while the terminal was canonical went
through the line discipline instead of reaching the editor: Ctrl-D became a NUL byte
(so the chat never ended), Ctrl-C a signal to the terminal's foreground process group
(none when the chat is not a terminal's job, so it was lost), and a long line was cut at
4,095 characters. Once the input ends the terminal is restored, so Ctrl-C while the chat
finishes is the terminal's SIGINT again.

From a pipe (a script, a test), each line is a message, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.input.vt100 import Vt100Input

__all__ = ["PROMPT", "Typed", "stdin_lines", "typed_input"]

PROMPT = "you> "


@dataclass(frozen=True)
class Typed:
    """The messages typed (ends at end of input) and where the chat prints meanwhile."""

    messages: AsyncIterator[str]
    out: TextIO


@contextlib.contextmanager
def typed_input(stdin: TextIO, out: TextIO) -> Iterator[Typed]:
    """The person's messages: edited on a terminal (``stdin`` and ``out`` both one), else
    ``stdin``'s lines (see the module docstring)."""
    if not (_is_terminal(stdin) and _is_terminal(out)):
        yield Typed(stdin_lines(stdin), out)
        return
    from prompt_toolkit import PromptSession  # only a terminal needs the editor
    from prompt_toolkit.patch_stdout import patch_stdout

    keys = _raw_input(stdin)
    session: PromptSession[str] = PromptSession(PROMPT, input=keys)
    with contextlib.ExitStack() as raw:
        raw.enter_context(keys.raw_mode())  # before anything says typing may start
        with patch_stdout(raw=True):
            yield Typed(_edited(session, raw), sys.stdout)


def _raw_input(stdin: TextIO) -> Vt100Input:
    """prompt_toolkit's terminal input, except that printing above the prompt keeps the
    terminal in raw mode (see the module docstring)."""
    from prompt_toolkit.input.vt100 import Vt100Input

    class _RawInput(Vt100Input):
        def cooked_mode(self) -> contextlib.AbstractContextManager[None]:
            return contextlib.nullcontext()  # output needs no canonical input mode

    return _RawInput(stdin)


async def _edited(session: PromptSession[str], raw: contextlib.ExitStack) -> AsyncIterator[str]:
    """The messages edited at the prompt; at end of input ``raw`` is closed (the terminal
    is restored)."""
    while True:
        try:
            text = await session.prompt_async(handle_sigint=False)  # ours stays installed
        except EOFError:
            raw.close()
            return
        except KeyboardInterrupt:  # raw mode: Ctrl-C is a key, not the terminal's SIGINT
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.Event().wait()  # the signal's handler cancels the chat
        yield text


async def stdin_lines(stream: TextIO) -> AsyncIterator[str]:
    """Lines of ``stream`` (without the newline), read by a daemon thread so that a
    pending read never keeps the process alive."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        for line in stream:
            loop.call_soon_threadsafe(lines.put_nowait, line.rstrip("\n"))
        loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=read, name="chat-stdin", daemon=True).start()
    while (line := await lines.get()) is not None:
        yield line


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream
        return False
