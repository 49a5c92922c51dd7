"""Word expansion: every value a tree-sitter-bash word node may take, as bash would expand it.

Bash expands a word in this order (bash(1), EXPANSION): brace expansion, tilde
expansion, parameter expansion and command substitution, word splitting, pathname
expansion, quote removal. ``WordEvaluator`` follows it over the tree:

- quoting: ``'…'``, ``"…"``, ``$'…'`` (C escapes), backslashes, adjacent pieces;
- parameters from the simulated ``ShellState`` (``$X``, ``${X}``, ``${X:-default}``,
  ``${X#pat}``, ``${X/a/b}``, arrays, ``$@``), each with *every* value it may hold;
- tilde with the simulated ``HOME``; brace lists and sequences;
- command and process substitution through a ``Substituter`` (the analysis walks the
  inner command and reports what it can tell about its output);
- field splitting of unquoted expansions (so ``cat${IFS}/memory`` is two fields).

Globs stay unexpanded, as markers (see ``bash_fields``): the guard matches patterns
against the virtual roots rather than a filesystem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol

from tree_sitter import Node

from harness.guard.budget import Budget
from harness.guard.expansion import expand_parameter
from harness.guard.fields import (
    COMMA,
    EMPTY,
    LBRACE,
    RBRACE,
    SPLIT,
    TAINT,
    UNKNOWN,
    fields_of,
    plain,
    unquoted_value,
)
from harness.guard.state import ShellState, Stream
from harness.guard.techniques import Technique
from harness.guard.text import ansi_c_decode, brace_expand, double_quoted_unescape, unquoted_word

MAX_ALTERNATIVES = 16
"""Most alternative values kept for one word."""

MAX_FIELDS = 256
"""Most fields one word may expand to (brace expansion)."""


class Substituter(Protocol):
    """What word expansion needs from the analysis: run a nested command, see its output."""

    def command_output(self, node: Node) -> Stream:
        """Analyse the command inside ``$(…)`` / backticks and return its output."""
        ...

    def process_path(self, node: Node) -> str:
        """Analyse the command inside ``<(…)`` / ``>(…)`` and return the field it becomes."""
        ...


def node_text(node: Node) -> str:
    """The source text of ``node``."""
    raw = node.text
    return raw.decode("utf-8", "surrogateescape") if raw is not None else ""


def product(parts: Sequence[frozenset[str]], limit: int = MAX_ALTERNATIVES) -> frozenset[str]:
    """All concatenations of one value from each part, at most ``limit`` of them."""
    results = [""]
    for part in parts:
        results = [prefix + value for prefix in results for value in sorted(part)][:limit]
    return frozenset(results)


def stream_value(stream: Stream) -> str:
    """The value ``$(…)`` takes for a command whose output is ``stream``."""
    marker = TAINT if stream.taint else ""
    if stream.text is None:
        return marker or UNKNOWN
    return stream.text.rstrip("\n") + marker


class WordEvaluator:
    """Expands word nodes against one shell state.

    Attributes:
        truncated: set when a word had more alternatives or fields than the limits (and
            then ``budget.gave_up`` too, when a budget is given).
        origins: each field produced so far -> the word node it came from (to name the
            technique when a field turns out to be a virtual path).
    """

    def __init__(
        self,
        state: ShellState,
        substituter: Substituter,
        origins: dict[str, Node] | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.state = state
        self.substituter = substituter
        self.truncated = False
        self.origins = origins if origins is not None else {}
        self.budget = budget

    def _truncate(self) -> None:
        """A word had more values than the limits keep: the analysis gives up on it."""
        self.truncated = True
        if self.budget is not None:
            self.budget.gave_up = "a word has more values than the guard follows"

    # -- public --------------------------------------------------------------------
    def fields(self, node: Node) -> list[tuple[str, ...]]:
        """The alternatives of ``node`` as an argument: each a tuple of encoded fields."""
        alternatives = []
        for encoded in sorted(self.encoded(node, quoted=False, first=True)):
            expanded = brace_expand(encoded, MAX_FIELDS)
            if len(expanded) >= MAX_FIELDS:
                self._truncate()
            fields: list[str] = []
            for text in expanded:
                fields.extend(fields_of(text))
            for field in fields:
                self.origins[field] = node
            alternatives.append(tuple(fields))
        return alternatives or [()]

    def argv(self, nodes: Iterable[Node]) -> list[tuple[str, ...]]:
        """Argument vectors for ``nodes``: every alternative of every word appears once.

        Combining all alternatives of all words could explode; cycling through them in
        step covers each value of each word with at most ``MAX_ALTERNATIVES`` vectors.
        """
        words = [self.fields(node) for node in nodes]
        count = max((len(alternatives) for alternatives in words), default=1)
        vectors = []
        for index in range(min(count, MAX_ALTERNATIVES)):
            vector: list[str] = []
            for alternatives in words:
                vector.extend(alternatives[index % len(alternatives)])
            vectors.append(tuple(vector))
        return vectors

    def value(self, node: Node) -> frozenset[str]:
        """The literal values an assignment ``NAME=<node>`` may store (no splitting, no globs).

        An array keeps its elements apart with the SPLIT marker, so ``"${a[@]}"`` gives
        one field per element.
        """
        if node.type == "array":
            items = [
                frozenset(SPLIT.join(plain(field) for field in alt) for alt in self.fields(child))
                for child in node.named_children
            ]
            if not items:
                return frozenset({""})
            joined = [items[0], *(frozenset(SPLIT + value for value in part) for part in items[1:])]
            return product(joined)
        return frozenset(plain(value) for value in self.encoded(node, quoted=False, first=True))

    def encoded(self, node: Node, *, quoted: bool, first: bool = False) -> frozenset[str]:
        """Encoded alternatives of one node (see ``bash_fields`` for the markers)."""
        kind = node.type
        if kind == "command_name" and node.named_child_count == 1:
            return self.encoded(node.named_children[0], quoted=quoted, first=first)
        if kind in ("concatenation", "command_name"):
            parts = [
                self.encoded(child, quoted=quoted, first=first and index == 0)
                for index, child in enumerate(node.children)
            ]
            return self._limited(parts)
        if kind in ("word", "number", "regex", "extglob_pattern", "special_variable_name"):
            return self._word(node_text(node), quoted=quoted, first=first)
        if kind in ("string", "translated_string"):
            return self._double_quoted(node)
        if kind == "raw_string":
            return frozenset({node_text(node)[1:-1] or EMPTY})
        if kind == "ansi_c_string":
            return frozenset({ansi_c_decode(node_text(node)[2:-1]) or EMPTY})
        if kind in ("simple_expansion", "expansion"):
            return self._parameter(node, quoted=quoted)
        if kind == "command_substitution":
            return self._substitution(node, quoted=quoted)
        if kind == "process_substitution":
            return frozenset({self.substituter.process_path(node)})
        if kind == "brace_expression":
            inner = "".join(node_text(child) for child in node.children[1:-1])
            return frozenset({LBRACE + inner + RBRACE})
        if kind == "$":
            return frozenset({"$"})
        if kind == "arithmetic_expansion":
            self._substitutions_within(node)
        return frozenset({UNKNOWN})

    def _substitutions_within(self, node: Node) -> None:
        """Run the ``$(…)`` / backquotes inside ``node`` (arithmetic): their commands run
        though the value is a number the guard does not compute."""
        stack = list(node.children)
        while stack:
            child = stack.pop()
            if child.type == "command_substitution":
                self.substituter.command_output(child)
            elif child.type == "process_substitution":
                self.substituter.process_path(child)
            else:
                stack.extend(child.children)

    # -- pieces --------------------------------------------------------------------
    def _limited(self, parts: Sequence[frozenset[str]]) -> frozenset[str]:
        total = 1
        for part in parts:
            total *= max(len(part), 1)
        if total > MAX_ALTERNATIVES:
            self._truncate()
        return product(parts)

    def _word(self, text: str, *, quoted: bool, first: bool) -> frozenset[str]:
        if quoted:
            return frozenset({double_quoted_unescape(text)})
        if first and text.startswith("~"):
            return self._tilde(text)
        return frozenset({unquoted_word(text)})

    def _tilde(self, text: str) -> frozenset[str]:
        slash = text.find("/")
        prefix, rest = (text, "") if slash < 0 else (text[:slash], text[slash:])
        if any(char in prefix for char in "\\'\"$"):
            return frozenset({unquoted_word(text)})
        user = prefix[1:]
        if user == "":
            homes = self.state.lookup("HOME")
        elif user == "+":
            homes = self.state.lookup("PWD")
        elif user == "-":
            homes = self.state.lookup("OLDPWD")
        elif user == "root":
            homes = frozenset({"/root"})
        else:
            homes = frozenset({f"/home/{user}"})
        tail = unquoted_word(rest)
        return frozenset(home.replace(COMMA, ",") + tail for home in homes)

    def _double_quoted(self, node: Node) -> frozenset[str]:
        parts = []
        for child in node.children:
            if child.type in ('"', '$"'):
                continue
            if child.type == "string_content":
                parts.append(frozenset({double_quoted_unescape(node_text(child))}))
            else:
                parts.append(self.encoded(child, quoted=True))
        values = self._limited(parts)
        return frozenset(value or EMPTY for value in values)

    def _parameter(self, node: Node, *, quoted: bool) -> frozenset[str]:
        values = expand_parameter(node, self.state, self._operand)
        if quoted:
            return values
        ifs = self._ifs()
        return frozenset(
            SPLIT.join(unquoted_value(part, ifs) for part in value.split(SPLIT)) for value in values
        )

    def _operand(self, nodes: Sequence[Node]) -> frozenset[str]:
        parts = [self.encoded(child, quoted=True) for child in nodes]
        return frozenset(plain(value) for value in self._limited(parts))

    def _substitution(self, node: Node, *, quoted: bool) -> frozenset[str]:
        value = stream_value(self.substituter.command_output(node))
        return frozenset({value if quoted else unquoted_value(value, self._ifs())})

    def _ifs(self) -> str:
        """The field separators: ``IFS`` when it has one known value, else the default."""
        values = self.state.lookup("IFS")
        value = next(iter(values)) if len(values) == 1 else " \t\n"
        return value if UNKNOWN not in value else " \t\n"


_TECHNIQUE_OF: dict[str, Technique] = {
    "command_substitution": "subst",
    "process_substitution": "subst",
    "simple_expansion": "var",
    "expansion": "var",
    "brace_expression": "brace",
    "string": "quote",
    "raw_string": "quote",
    "ansi_c_string": "quote",
    "translated_string": "quote",
}
_TECHNIQUE_ORDER: tuple[Technique, ...] = ("subst", "var", "brace", "tilde", "quote")


def word_technique(node: Node, root: str) -> Technique:
    """How word ``node`` produced a path into ``root`` (``/memory``): a short tag.

    ``subst``, ``var`` and ``tilde`` win; a word that spells the root out is ``abs``;
    otherwise the trick that built it: ``brace`` or ``quote``.
    """
    found: set[Technique] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        technique = _TECHNIQUE_OF.get(current.type)
        if technique is not None:
            found.add(technique)
        if current.type == "word":
            text = node_text(current)
            if "\\" in text:
                found.add("quote")
            if "{" in text or "," in text:
                found.add("brace")
            if text.startswith("~"):
                found.add("tilde")
        stack.extend(current.children)
    for technique in ("subst", "var", "tilde"):
        if technique in found:
            return technique
    if root in node_text(node):
        return "abs"
    return next((t for t in _TECHNIQUE_ORDER if t in found), "abs")


def words_of(text: str) -> list[str]:
    """Split plain text on whitespace the way ``xargs`` and unquoted ``$(…)`` would."""
    return [word for word in re.split(r"[ \t\n]+", text) if word]
