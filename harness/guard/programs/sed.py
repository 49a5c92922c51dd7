"""The file and shell operands hidden inside a sed script.

Source: GNU sed manual, "sed scripts" and "Commands". Most of a script is patterns and
replacement text (mentions); only these reach the filesystem or a shell: ``r``/``R``
FILE (read), ``w``/``W`` FILE and the ``w FILE`` flag of ``s`` (write), and ``e``
COMMAND and the ``e`` flag of ``s`` (run: the replaced pattern space, read here as the
replacement text). A filename runs to the end of the line.
"""

from __future__ import annotations

from dataclasses import dataclass

_NO_ARGUMENT = set("=dDgGhHlnNpPxzF")
_TO_END_OF_LINE = set("aic:")
_LABEL = set("btTv")


@dataclass(frozen=True)
class SedOperand:
    """A file or command inside a sed script.

    Attributes:
        kind: ``"read"``, ``"write"`` or ``"shell"``.
        text: the file name or the shell command.
    """

    kind: str
    text: str


class _Parser:
    def __init__(self, script: str) -> None:
        self.script = script
        self.pos = 0
        self.found: list[SedOperand] = []

    def _peek(self) -> str:
        return self.script[self.pos] if self.pos < len(self.script) else ""

    def _rest_of_line(self) -> str:
        end = self.script.find("\n", self.pos)
        end = len(self.script) if end < 0 else end
        text = self.script[self.pos : end]
        self.pos = end
        return text.strip()

    def _skip_delimited(self, delimiter: str) -> None:
        while self.pos < len(self.script):
            char = self.script[self.pos]
            self.pos += 1
            if char == "\\":
                self.pos += 1
            elif char == delimiter:
                return

    def _address(self) -> None:
        for _ in range(2):
            char = self._peek()
            if char == "/" or char == "\\":
                if char == "\\":
                    self.pos += 1
                delimiter = self._peek()
                self.pos += 1
                self._skip_delimited(delimiter)
                while self._peek() in ("I", "M"):
                    self.pos += 1
            else:
                while self._peek() and (self._peek().isdigit() or self._peek() in "$~+"):
                    self.pos += 1
            if self._peek() != ",":
                break
            self.pos += 1
        while self._peek() in (" ", "\t", "!"):
            self.pos += 1

    def _substitute(self) -> None:
        delimiter = self._peek()
        self.pos += 1
        self._skip_delimited(delimiter)
        start = self.pos
        self._skip_delimited(delimiter)
        replacement = self.script[start : self.pos - 1]
        flags = self.pos
        while self._peek() and self._peek() in "gpiImMe0123456789":
            self.pos += 1
        if "e" in self.script[flags : self.pos]:  # the pattern space, replaced, is run
            self.found.append(SedOperand("shell", replacement))
        if self._peek() == "w":
            self.pos += 1
            self.found.append(SedOperand("write", self._rest_of_line()))

    def _command(self, char: str) -> bool:
        if char == "s":
            self._substitute()
        elif char == "y":
            delimiter = self._peek()
            self.pos += 1
            self._skip_delimited(delimiter)
            self._skip_delimited(delimiter)
        elif char in "rR":
            self.found.append(SedOperand("read", self._rest_of_line()))
        elif char in "wW":
            self.found.append(SedOperand("write", self._rest_of_line()))
        elif char == "e":
            command = self._rest_of_line()
            if command:
                self.found.append(SedOperand("shell", command))
        elif char in _TO_END_OF_LINE:
            self._rest_of_line()
        elif char in _LABEL or char in "qQlL":
            while self._peek() and self._peek() not in ";\n}":
                self.pos += 1
        elif char not in _NO_ARGUMENT and char not in "{}":
            return False
        return True

    def parse(self) -> list[SedOperand]:
        while self.pos < len(self.script):
            while self._peek() in (" ", "\t", "\n", ";"):
                self.pos += 1
            if self.pos >= len(self.script):
                break
            if self._peek() == "#":
                self._rest_of_line()
                continue
            self._address()
            char = self._peek()
            self.pos += 1
            if not self._command(char):
                break
        return self.found


def sed_operands(script: str) -> list[SedOperand]:
    """The files a sed ``script`` reads or writes and the commands it runs.

    >>> sed_operands("1,20w /memory/head.txt")
    [SedOperand(kind='write', text='/memory/head.txt')]
    >>> sed_operands("s#/memory/#/var/lib/#g")
    []
    """
    return _Parser(script).parse()
