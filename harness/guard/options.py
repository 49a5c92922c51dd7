"""Command-line option parsing for the bash guard's command table (POSIX/GNU conventions).

``parse_args`` splits a command's fields into options (with their values, when the
command's ``OptionSpec`` says the option takes one) and operands. It knows the
conventions, not the commands: short clusters (``-rn``, ``-A5``, ``-e PATTERN``), long
options with ``=`` or a separate value, ``--`` ending options, and commands whose
options stop at the first operand (``sudo``, ``env``, ``timeout``: the rest is the
command they run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.guard.fields import plain


@dataclass(frozen=True)
class OptionSpec:
    """How one command reads its options.

    Attributes:
        takes_value: option names that consume a value (``"-e"``, ``"--regexp"``).
        stop_at_operand: options end at the first operand (wrappers).
        keep_double_dash: report ``--`` as an ``Arg`` with option ``"--"`` (kubectl exec).
    """

    takes_value: frozenset[str] = frozenset()
    stop_at_operand: bool = False
    keep_double_dash: bool = False


@dataclass(frozen=True)
class Arg:
    """One parsed argument.

    Attributes:
        option: the option name (``"-e"``, ``"--file"``), or None for an operand.
        value: the option's value or the operand, as an encoded field; None for a flag.
    """

    option: str | None
    value: str | None

    @property
    def is_operand(self) -> bool:
        """True for an operand (not an option)."""
        return self.option is None


def names(*texts: str) -> frozenset[str]:
    """The whitespace-separated words of ``texts`` as a set (``names("-e -f")``)."""
    return frozenset(word for text in texts for word in text.split())


def spec(*takes_value: str, stop_at_operand: bool = False) -> OptionSpec:
    """Build an ``OptionSpec`` from value-taking option names (several per string allowed).

    >>> sorted(spec("-e --regexp", "-f").takes_value)
    ['--regexp', '-e', '-f']
    """
    return OptionSpec(names(*takes_value), stop_at_operand=stop_at_operand)


def parse_args(args: Sequence[str], option_spec: OptionSpec) -> list[Arg]:
    """Split encoded ``args`` into options and operands following ``option_spec``.

    >>> [(a.option, a.value) for a in parse_args(["-rn", "-e", "x", "f"], spec("-e"))]
    [('-r', None), ('-n', None), ('-e', 'x'), (None, 'f')]
    """
    parsed: list[Arg] = []
    index = 0
    while index < len(args):
        field = args[index]
        text = plain(field)
        index += 1
        if text == "--":
            if option_spec.keep_double_dash:
                parsed.append(Arg("--", None))
            parsed.extend(Arg(None, rest) for rest in args[index:])
            break
        if not text.startswith("-") or text == "-":
            parsed.append(Arg(None, field))
            if option_spec.stop_at_operand:
                parsed.extend(Arg(None, rest) for rest in args[index:])
                break
            continue
        consumed = _option(field, text, args, index, option_spec, parsed)
        index += consumed
    return parsed


def _option(
    field: str,
    text: str,
    args: Sequence[str],
    index: int,
    option_spec: OptionSpec,
    parsed: list[Arg],
) -> int:
    """Append the option(s) in ``field``; return how many following args were consumed."""
    following = args[index] if index < len(args) else None
    if text.startswith("--"):
        name, equals, _ = text.partition("=")
        if equals:
            parsed.append(Arg(name, field[len(name) + 1 :]))
            return 0
        if name in option_spec.takes_value:
            parsed.append(Arg(name, following))
            return 1 if following is not None else 0
        parsed.append(Arg(name, None))
        return 0
    for position in range(1, len(text)):
        name = "-" + text[position]
        if name in option_spec.takes_value:
            attached = field[position + 1 :]
            if attached:
                parsed.append(Arg(name, attached))
                return 0
            parsed.append(Arg(name, following))
            return 1 if following is not None else 0
        parsed.append(Arg(name, None))
    return 0


def operands(parsed: Sequence[Arg]) -> list[str]:
    """The operand fields of ``parsed``, in order."""
    return [arg.value for arg in parsed if arg.option is None and arg.value is not None]


def option_values(parsed: Sequence[Arg], *names: str) -> list[str]:
    """The values given to any of the options ``names``, in order."""
    return [arg.value for arg in parsed if arg.option in names and arg.value is not None]


def has_option(parsed: Sequence[Arg], *names: str) -> bool:
    """Whether any of the options ``names`` was given."""
    return any(arg.option in names for arg in parsed)
