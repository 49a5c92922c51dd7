"""Running the real ``warroom`` command on a pseudo-terminal, as a person's terminal runs it.

``PtyCommand.start`` gives the command a pty (stdin and stdout; stderr is a pipe) of
``COLUMNS`` × ``ROWS``; ``type`` writes what the keyboard would send, ``paste`` what a
terminal sends for a bracketed paste (``ESC [200~`` text ``ESC [201~``, its newlines as
carriage returns, as xterm sends them); ``until`` reads until a predicate holds over what
was shown, with terminal control sequences removed. ``PROMPT_TOOLKIT_NO_CPR`` tells the
line editor not to ask this terminal, which answers nothing, for the cursor position.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import signal
import struct
import termios
import time
from collections.abc import Callable
from pathlib import Path

from tests.bot.cli_support import WARROOM

COLUMNS, ROWS = 200, 50
ENTER = b"\r"
CTRL_D = b"\x04"
_CONTROLS = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]|\x1b[=>]")


class PtyCommand:
    """A ``warroom`` process on a pty (see the module docstring)."""

    def __init__(self, process: asyncio.subprocess.Process, master: int) -> None:
        self.process = process
        self._master = master
        self._shown = bytearray()
        self._changed = asyncio.Event()
        self._ended = False
        asyncio.get_running_loop().add_reader(master, self._read)

    @classmethod
    async def start(cls, *args: str, env: dict[str, str], cwd: Path) -> PtyCommand:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        env = {
            **env,
            "TERM": "xterm-256color",
            "PROMPT_TOOLKIT_NO_CPR": "1",
            "PYTHONFAULTHANDLER": "1",  # SIGABRT dumps every thread's stack (see finish)
        }
        process = await asyncio.create_subprocess_exec(
            WARROOM,
            *args,
            env=env,
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        os.close(slave)
        os.set_blocking(master, False)
        return cls(process, master)

    @property
    def text(self) -> str:
        """Everything shown so far, control sequences and carriage returns removed."""
        plain = _CONTROLS.sub(b"", bytes(self._shown)).replace(b"\r", b"")
        return plain.decode("utf-8", "replace")

    async def type(self, keys: bytes) -> None:
        """Send ``keys`` as typed (the pty takes them as it has room)."""
        left = memoryview(keys)
        deadline = time.monotonic() + 60
        while left:
            try:
                left = left[os.write(self._master, left) :]
            except BlockingIOError:
                assert time.monotonic() < deadline, "the terminal took no input for 60 s"
                await asyncio.sleep(0.01)  # polling for room in the pty, with a deadline

    async def paste(self, text: str) -> None:
        """Send ``text`` as a terminal sends a bracketed paste."""
        body = text.replace("\r\n", "\n").replace("\n", "\r").encode()
        await self.type(b"\x1b[200~" + body + b"\x1b[201~")

    async def until(self, predicate: Callable[[str], bool], *, timeout_s: float = 60.0) -> str:
        """Wait until ``predicate(text)``; AssertionError after ``timeout_s`` or at the end."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self.text):
            if self._ended:
                raise AssertionError(f"the terminal closed first; shown:\n{self.text}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"not shown within {timeout_s} s; shown:\n{self.text}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                continue
        return self.text

    async def finish(self, *, timeout_s: float = 120.0) -> int:
        """The exit code (killing the process after ``timeout_s``), then the pty closed."""
        try:
            code = await asyncio.wait_for(self.process.wait(), timeout_s)
        except TimeoutError:
            self.process.send_signal(signal.SIGABRT)  # faulthandler prints where it sits
            stacks = await self._stderr_after_exit()
            raise AssertionError(
                f"warroom did not exit within {timeout_s} s; its threads:\n{stacks}"
            ) from None
        finally:
            self.close()
        return code

    async def _stderr_after_exit(self) -> str:
        """What the process wrote to stderr, once it ended (killed after 10 s more)."""
        assert self.process.stderr is not None
        try:
            err = await asyncio.wait_for(self.process.stderr.read(), 10)
        except TimeoutError:
            err = b"(no faulthandler dump within 10 s)"
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        return err.decode("utf-8", "replace")[-20_000:]

    def pause(self) -> None:
        """Stop reading what the command shows: once the pty's buffer is full, its next
        write blocks until ``resume``."""
        asyncio.get_running_loop().remove_reader(self._master)

    def resume(self) -> None:
        """Read again after ``pause``."""
        asyncio.get_running_loop().add_reader(self._master, self._read)

    def unread(self) -> int:
        """Bytes the command wrote that were not read yet (the pty's read buffer holds at
        most 4,095: ``FIONREAD`` on the master)."""
        count = fcntl.ioctl(self._master, termios.FIONREAD, struct.pack("i", 0))
        return int(struct.unpack("i", count)[0])

    def close(self) -> None:
        """Stop reading and close the pty (idempotent)."""
        if self._master >= 0:
            asyncio.get_running_loop().remove_reader(self._master)
            os.close(self._master)
            self._master = -1

    def _read(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the other end closed (the process ended)
            data = b""
        if not data:
            self._ended = True
            asyncio.get_running_loop().remove_reader(self._master)
        self._shown += data
        self._changed.set()
