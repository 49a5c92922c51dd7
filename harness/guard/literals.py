"""String literals in interpreter code (python -c, perl -e, node -e, awk programs …).

The guard does not run or fully parse other languages. It scans their code for string
literals, which is where a file path or a shell command lives, and reports:

- each literal, and each *chain* of literals joined by ``+`` / ``.`` (concatenation) or
  ``/`` / ``,`` (path joining: ``Path('/') / 'memory'``, ``os.path.join('/', 'memory')``),
  with ``os.sep``-like names read as ``"/"``;
- whether a literal goes to a shell: backticks, ``qx{…}``/``%x(…)``, the first argument of
  ``system``/``popen``/``exec``/``check_output``…, the string after ``'-c'`` in an argv
  list, a two-argument perl ``open`` pipe (``"cmd |"``), awk's ``"cmd" | getline``.

Regex literals (``/memory/`` in awk or perl) are not strings and are not reported: a
pattern that mentions a namespace is not a touch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.guard.options import names

EXEC_NAMES = names(
    "system popen popen2 popen3 exec execSync spawn spawnSync shell_exec passthru "
    "getoutput getstatusoutput check_output check_call call run Popen capture2 capture2e "
    "capture3 pipeline syscall"
)
MENTION_NAMES = names(
    "print puts say printf log echo sub gsub subn search match fullmatch findall finditer "
    "substr length sprintf toupper tolower upper lower strip len basename dirname splitext "
    "compile replace split startswith endswith includes indexOf index count"
)
"""Calls whose string arguments are text or patterns, not paths (``re.sub('/memory', …)``)."""
SEPARATOR_NAMES = frozenset(
    {
        "os.sep",
        "os.path.sep",
        "path.sep",
        "File::SEPARATOR",
        "DIRECTORY_SEPARATOR",
        "File.SEPARATOR",
    }
)
_HASH_COMMENTS = frozenset({"python", "perl", "ruby", "awk", "php"})
_SLASH_COMMENTS = frozenset({"node", "php"})
_SHELL_BACKTICKS = frozenset({"perl", "ruby", "php"})
_NAME = re.compile(r"[A-Za-z_][\w.]*(?:::\w+)*")
_QUOTE_OPERATORS = {"qx": True, "q": False, "qq": False, "%x": True, "%q": False, "%Q": False}
_CLOSING = {"(": ")", "[": "]", "{": "}", "<": ">"}
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "0": "\0"}


@dataclass(frozen=True)
class CodeLiteral:
    """A string found in interpreter code.

    Attributes:
        text: the string's value (escapes decoded; chains joined).
        shell: True when the code hands it to a shell.
    """

    text: str
    shell: bool


@dataclass(frozen=True)
class _Token:
    kind: str  # "lit", "name", "op"
    text: str
    shell: bool = False


class _Lexer:
    def __init__(self, language: str, code: str) -> None:
        self.language = language
        self.code = code
        self.pos = 0
        self.tokens: list[_Token] = []

    def _at(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.code[index] if index < len(self.code) else ""

    def run(self) -> list[_Token]:
        while self.pos < len(self.code):
            char = self._at()
            if char.isspace():
                self.pos += 1
            elif self._comment():
                continue
            elif char in "'\"" or (char == "`"):
                self._string(char)
            elif char.isalpha() or char == "_" or (char == "%" and self._at(1) in "xqQ"):
                self._name()
            else:
                self.tokens.append(_Token("op", char))
                self.pos += 1
        return self.tokens

    def _comment(self) -> bool:
        char = self._at()
        previous = self.code[self.pos - 1] if self.pos else " "
        hash_comment = (
            char == "#"
            and self.language in _HASH_COMMENTS
            and (previous.isspace() or previous in ";{")
        )
        slash_comment = char == "/" and self._at(1) in "/*" and self.language in _SLASH_COMMENTS
        if not (hash_comment or slash_comment):
            return False
        if slash_comment and self._at(1) == "*":
            end = self.code.find("*/", self.pos + 2)
            self.pos = len(self.code) if end < 0 else end + 2
            return True
        end = self.code.find("\n", self.pos)
        self.pos = len(self.code) if end < 0 else end
        return True

    def _string(self, quote: str, *, raw: bool = False) -> None:
        triple = self.code.startswith(quote * 3, self.pos) and self.language == "python"
        delimiter = quote * 3 if triple else quote
        self.pos += len(delimiter)
        out: list[str] = []
        while self.pos < len(self.code) and not self.code.startswith(delimiter, self.pos):
            char = self._at()
            if char == "\\" and not raw and self.pos + 1 < len(self.code):
                out.append(self._escape())
                continue
            out.append(char)
            self.pos += 1
        self.pos += len(delimiter)
        shell = quote == "`" and self.language in _SHELL_BACKTICKS
        self.tokens.append(_Token("lit", "".join(out), shell))

    def _escape(self) -> str:
        nxt = self._at(1)
        if nxt == "x":
            digits = re.match(r"[0-9a-fA-F]{1,2}", self.code[self.pos + 2 : self.pos + 4])
            if digits:
                self.pos += 2 + len(digits.group())
                return chr(int(digits.group(), 16))
        self.pos += 2
        return _SIMPLE_ESCAPES.get(nxt, nxt)

    def _name(self) -> None:
        if self._at() == "%":
            name = "%" + self._at(1)
        else:
            match = _NAME.match(self.code, self.pos)
            name = match.group() if match else self._at()
        after = self.pos + len(name)
        if name in _QUOTE_OPERATORS and after < len(self.code) and self._quote_delimiter(after):
            self.pos = after
            self._quoted_operator(_QUOTE_OPERATORS[name])
            return
        if (
            self.language == "python"
            and after < len(self.code)
            and self.code[after] in "'\""
            and re.fullmatch(r"[rRbBuUfF]{1,2}", name)
        ):
            self.pos = after
            self._string(self.code[after], raw="r" in name.lower())
            return
        self.tokens.append(_Token("name", name))
        self.pos = after

    def _quote_delimiter(self, index: int) -> bool:
        char = self.code[index]
        return char in _CLOSING or (not char.isalnum() and not char.isspace() and char not in "=,;")

    def _quoted_operator(self, shell: bool) -> None:
        opening = self._at()
        closing = _CLOSING.get(opening, opening)
        depth = 0
        self.pos += 1
        start = self.pos
        while self.pos < len(self.code):
            char = self._at()
            if char == "\\":
                self.pos += 2
                continue
            if char == opening and closing != opening:
                depth += 1
            elif char == closing:
                if depth == 0:
                    break
                depth -= 1
            self.pos += 1
        self.tokens.append(_Token("lit", self.code[start : self.pos], shell))
        self.pos += 1


def _is_value(token: _Token) -> bool:
    return token.kind == "lit" or (token.kind == "name" and token.text in SEPARATOR_NAMES)


def _value(token: _Token) -> str:
    return token.text if token.kind == "lit" else "/"


def _chains(tokens: list[_Token]) -> list[tuple[int, str]]:
    """(index of the first token, joined text) for each chain of two or more literals."""
    chains = []
    index = 0
    while index < len(tokens):
        if not _is_value(tokens[index]):
            index += 1
            continue
        start, text = index, _value(tokens[index])
        parts = 1
        while (
            index + 2 < len(tokens)
            and tokens[index + 1].kind == "op"
            and tokens[index + 1].text in "+./,"
            and _is_value(tokens[index + 2])
        ):
            joiner = "" if tokens[index + 1].text in "+." else "/"
            text += joiner + _value(tokens[index + 2])
            parts += 1
            index += 2
        if parts > 1:
            chains.append((start, text))
        index += 1
    return chains


def _goes_to_shell(tokens: list[_Token], index: int, language: str) -> bool:
    token = tokens[index]
    if token.shell:
        return True
    before = tokens[index - 1] if index else None
    after = tokens[index + 1 : index + 3]
    if before is not None and before.kind == "name" and _call_name(before.text) in EXEC_NAMES:
        return True
    if before is not None and before.kind == "name" and before.text in MENTION_NAMES:
        return False
    if (
        before is not None
        and before.text in "(["
        and index >= 2
        and tokens[index - 2].kind == "name"
        and _call_name(tokens[index - 2].text) in EXEC_NAMES
    ):
        return True
    if before is not None and before.text == "," and index >= 2 and tokens[index - 2].text == "-c":
        return True
    if language == "awk":
        piped_in = before is not None and before.text == "|"
        getline = len(after) == 2 and after[0].text == "|" and after[1].text == "getline"
        return piped_in or getline
    return False


def _compared(tokens: list[_Token], index: int) -> bool:
    """The literal is an operand of a comparison or a match: ``$1 == "/memory/x"``,
    ``line ~ "/skills/"``, ``$x eq "…"``, ``"/incident/" in path`` (text, not a path).

    >>> tokens = [_Lexer("awk", code).run() for code in ('$1 == "/m"', '$1 > "/m"')]
    >>> [_compared(found, len(found) - 1) for found in tokens]
    [True, False]
    """
    texts = [token.text for token in tokens]
    before = texts[max(index - 2, 0) : index]
    after = texts[index + 1 : index + 3]
    return (
        before[-1:] == ["~"]
        or before in (["=", "="], ["!", "="])
        or after in (["=", "="], ["!", "="])
        or after[:1] == ["~"]
        or before[-1:] in (["eq"], ["ne"])
        or after[:1] in (["eq"], ["ne"], ["in"])
        or after[:2] == ["not", "in"]
    )


def _awk_variable_use(tokens: list[_Token], calls: list[str], index: int) -> str | None:
    """How awk uses the variable literal ``index`` is assigned to (``p = "/memory/x"``).

    ``"shell"`` when the variable is a command (``p | getline``, ``print | p``,
    ``system(p)``), ``"file"`` when it names a file (``getline < p``, ``print > p``,
    ``close(p)``), ``"text"`` when used only elsewhere (``$1 == p``); None when the
    literal is not assigned to a variable.

    >>> tokens = _Lexer("awk", 'BEGIN { p = "/m" } $1 == p').run()
    >>> _awk_variable_use(tokens, _enclosing_calls(tokens), 4)
    'text'
    """
    if index < 2 or tokens[index - 1].text != "=" or tokens[index - 2].kind != "name":
        return None
    if index >= 3 and tokens[index - 3].text in ("=", "!", "<", ">"):
        return None
    name, use = tokens[index - 2].text, "text"
    for position, token in enumerate(tokens):
        if token.kind != "name" or token.text != name or position == index - 2:
            continue
        before = tokens[position - 1].text if position else ""
        after = tokens[position + 1].text if position + 1 < len(tokens) else ""
        if before == "|" or after == "|" or calls[position] == "system":
            return "shell"
        if before in ("<", ">") or calls[position] in ("close", "fflush"):
            use = "file"
    return use


def _printed(tokens: list[_Token], index: int) -> bool:
    """``print "…"`` / ``puts "…"`` without parentheses: the literal is output text."""
    before = tokens[index - 1] if index else None
    return before is not None and before.kind == "name" and before.text in MENTION_NAMES


def _enclosing_calls(tokens: list[_Token]) -> list[str]:
    """For each token, the name of the innermost call whose parentheses hold it."""
    stack: list[str] = []
    enclosing = []
    for index, token in enumerate(tokens):
        enclosing.append(stack[-1] if stack else "")
        if token.text == "(" and token.kind == "op":
            before = tokens[index - 1] if index else None
            stack.append(_call_name(before.text) if before and before.kind == "name" else "")
        elif token.text == ")" and token.kind == "op" and stack:
            stack.pop()
    return enclosing


def _call_name(name: str) -> str:
    return re.split(r"\.|::", name)[-1]


def code_literals(language: str, code: str) -> list[CodeLiteral]:
    """The string literals (and literal chains) in ``code`` written in ``language``.

    Args:
        language: ``python``, ``perl``, ``ruby``, ``node``, ``php``, ``awk`` or another
            name (then only quotes are recognised).
        code: the program text.

    >>> [lit.text for lit in code_literals("python", "import os; os.path.join('/', 'memory')")]
    ['/', 'memory', '//memory']
    >>> code_literals("perl", "print `cat /skills/x`")[0].shell
    True
    """
    tokens = _Lexer(language, code).run()
    calls = _enclosing_calls(tokens)
    found = []
    for index, token in enumerate(tokens):
        if token.kind != "lit":
            continue
        mention = calls[index] in MENTION_NAMES or _printed(tokens, index)
        use = _awk_variable_use(tokens, calls, index) if language == "awk" else None
        if not token.shell and (mention or use == "text" or _compared(tokens, index)):
            continue
        text = token.text
        shell = use == "shell" or _goes_to_shell(tokens, index, language)
        stripped = text.strip()
        if language == "perl" and (stripped.startswith("|") or stripped.endswith("|")):
            text, shell = stripped.strip("|"), True
        found.append(CodeLiteral(text, shell))
    found.extend(
        CodeLiteral(chain, False)
        for start, chain in _chains(tokens)
        if calls[start] not in MENTION_NAMES
    )
    return found
