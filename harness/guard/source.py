"""Shell source prepared for tree-sitter: line continuations joined, here-documents lifted out.

tree-sitter-bash mis-parses two things bash handles fine (docs/architecture.md §7):

- a backslash-newline outside single quotes is a line continuation that bash removes
  before splitting words (``/mem\\⏎ory`` is ``/memory``), but the grammar splits the word;
- text written after a here-document start on the same line (``cat <<EOF | bash``) is
  nested inside the heredoc node, and a second heredoc or a redirection after the first
  one produces ERROR nodes.

``prepare_source`` walks the text once with a small quote-aware scanner, joins
continuations, and replaces every ``<<WORD`` / ``<<-WORD`` with ``< TOKEN`` while keeping
each body aside, so the tree has ordinary input redirections from a placeholder file and
the guard can look the body up by its token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD_END = " \t\n;&|<>()"
_ORDINARY = re.compile(r"[^\\'\"$()`#<\n]+")


@dataclass(frozen=True)
class Heredoc:
    """One here-document body.

    Attributes:
        body: the text bash would feed on standard input (lines joined with ``\\n``,
            ending in ``\\n`` when non-empty).
        expands: True when the delimiter was unquoted, so bash expands ``$VAR`` and
            ``$(...)`` inside the body.
    """

    body: str
    expands: bool


@dataclass(frozen=True)
class Source:
    """Shell text ready for tree-sitter, plus the here-documents lifted out of it.

    Attributes:
        text: the rewritten command text.
        heredocs: placeholder token (a word in ``text``) -> its here-document.
    """

    text: str
    heredocs: dict[str, Heredoc]


@dataclass
class _Frame:
    kind: str  # "code", "sq", "dq" or "arith"
    depth: int = 0
    backtick: bool = False


@dataclass
class _Pending:
    token: str
    delimiter: str
    strip_tabs: bool
    expands: bool


class _Scanner:
    """One pass over the command text; ``frames`` is the quoting/nesting stack."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.out: list[str] = []
        self.frames: list[_Frame] = [_Frame("code")]
        self.pending: list[_Pending] = []
        self.heredocs: dict[str, Heredoc] = {}
        self.token_stem = _unused_stem(text)

    def run(self) -> Source:
        while self.pos < len(self.text):
            kind = self.frames[-1].kind
            if kind == "sq":
                self._single_quoted()
            elif kind == "dq":
                self._double_quoted()
            elif kind == "arith":
                self._arithmetic()
            else:
                self._code()
        if self.pending:
            self._read_bodies()
        return Source("".join(self.out), self.heredocs)

    # -- helpers -----------------------------------------------------------------
    def _peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if index < len(self.text) else ""

    def _emit(self, count: int = 1) -> None:
        self.out.append(self.text[self.pos : self.pos + count])
        self.pos += count

    def _continuation(self) -> bool:
        if self._peek() == "\\" and self._peek(1) == "\n":
            self.pos += 2
            return True
        return False

    # -- states --------------------------------------------------------------------
    def _single_quoted(self) -> None:
        if self._peek() == "'":
            self.frames.pop()
        self._emit()

    def _double_quoted(self) -> None:
        char = self._peek()
        if self._continuation():
            return
        if char == "\\":
            self._emit(2)
        elif char == '"':
            self.frames.pop()
            self._emit()
        elif char == "$" and self._peek(1) == "(":
            self._open_dollar_paren()
        elif char == "`":
            self.frames.append(_Frame("code", backtick=True))
            self._emit()
        else:
            self._emit()

    def _arithmetic(self) -> None:
        frame = self.frames[-1]
        char = self._peek()
        if self._continuation():
            return
        if char == "(":
            frame.depth += 1
        elif char == ")":
            if frame.depth == 0 and self._peek(1) == ")":
                self.frames.pop()
                self._emit(2)
                return
            frame.depth -= 1
        self._emit()

    def _open_dollar_paren(self) -> None:
        if self._peek(2) == "(":
            self.frames.append(_Frame("arith"))
            self._emit(3)
        else:
            self.frames.append(_Frame("code"))
            self._emit(2)

    def _code(self) -> None:
        ordinary = _ORDINARY.match(self.text, self.pos)
        if ordinary is not None:
            self.out.append(ordinary.group())
            self.pos = ordinary.end()
            return
        frame = self.frames[-1]
        char = self._peek()
        if self._continuation():
            return
        if char == "\\":
            self._emit(2)
        elif char == "'":
            self.frames.append(_Frame("sq"))
            self._emit()
        elif char == '"':
            self.frames.append(_Frame("dq"))
            self._emit()
        elif char == "$" and self._peek(1) == "'":
            self._ansi_c()
        elif char == "$" and self._peek(1) == "(":
            self._open_dollar_paren()
        elif char == "(" and self._peek(1) == "(" and self._at_word_start():
            self.frames.append(_Frame("arith"))
            self._emit(2)
        elif char == "(":
            frame.depth += 1
            self._emit()
        elif char == ")":
            self._close_paren(frame)
        elif char == "`" and frame.backtick:
            self.frames.pop()
            self._emit()
        elif char == "`":
            self.frames.append(_Frame("code", backtick=True))
            self._emit()
        elif char == "#" and self._at_word_start():
            self._comment()
        elif char == "<" and self._peek(1) == "<" and self._peek(2) != "<":
            self._heredoc_start()
        elif char == "<" and self._peek(1) == "<":
            self._emit(3)
        elif char == "\n":
            self._emit()
            self._read_bodies()
        else:
            self._emit()

    def _close_paren(self, frame: _Frame) -> None:
        if frame.depth == 0 and len(self.frames) > 1:
            self.frames.pop()
        else:
            frame.depth -= 1
        self._emit()

    def _at_word_start(self) -> bool:
        return self.pos == 0 or self.text[self.pos - 1] in " \t\n;&|()"

    def _ansi_c(self) -> None:
        self._emit(2)
        while self.pos < len(self.text) and self._peek() != "'":
            self._emit(2 if self._peek() == "\\" else 1)
        self._emit()

    def _comment(self) -> None:
        while self.pos < len(self.text) and self._peek() != "\n":
            self._emit()

    def _heredoc_start(self) -> None:
        start = self.pos
        self.pos += 2
        strip_tabs = self._peek() == "-"
        if strip_tabs:
            self.pos += 1
        while self._peek() in (" ", "\t"):
            self.pos += 1
        delimiter, quoted = self._delimiter_word()
        if not delimiter:
            self.pos = start
            self._emit(2)
            return
        token = f"{self.token_stem}{len(self.heredocs) + len(self.pending)}"
        self.pending.append(_Pending(token, delimiter, strip_tabs, not quoted))
        self.out.append(f"< {token}")

    def _delimiter_word(self) -> tuple[str, bool]:
        word: list[str] = []
        quoted = False
        while self.pos < len(self.text) and self._peek() not in _WORD_END:
            char = self._peek()
            if char in "'\"":
                quoted = True
                end = self.text.find(char, self.pos + 1)
                end = len(self.text) if end < 0 else end
                word.append(self.text[self.pos + 1 : end])
                self.pos = end + 1
            elif char == "\\":
                quoted = True
                word.append(self._peek(1))
                self.pos += 2
            else:
                word.append(char)
                self.pos += 1
        return "".join(word), quoted

    def _read_bodies(self) -> None:
        for pending in self.pending:
            lines: list[str] = []
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                line = self.text[self.pos : end]
                self.pos = min(end + 1, len(self.text))
                if pending.strip_tabs:
                    line = line.lstrip("\t")
                if line == pending.delimiter:
                    break
                lines.append(line)
            body = "".join(line + "\n" for line in lines)
            if pending.expands:
                body = body.replace("\\\n", "")
            self.heredocs[pending.token] = Heredoc(body, pending.expands)
        self.pending.clear()


def _unused_stem(text: str) -> str:
    stem = "__warroom_heredoc_"
    while stem in text:
        stem += "x"
    return stem


def prepare_source(command: str) -> Source:
    """Join line continuations and lift here-documents out of ``command``.

    Args:
        command: the shell text the model sent.

    Returns:
        the rewritten text and the here-document bodies by placeholder token. A
        here-document whose delimiter never appears runs to the end of the text, as in bash.

    >>> prepare_source("cat /mem\\\\\\nory").text
    'cat /memory'
    """
    if "<<" not in command and "\\\n" not in command:
        return Source(command, {})
    return _Scanner(command).run()
