"""Files named in a list a program reads: ``tar -T``, ``rsync --files-from``, ``cpio``.

Some programs take the names of the files they open from a list file or from standard
input (``find … | cpio -o``, ``echo /memory/x | tar -czf a.tgz -T -``,
``printf '/memory/x\\0' | du --files0-from=-``). When the guard knows the list's text
(its standard input, or a file this same command wrote), each name in it is a path the
program opens. This holds whatever the program, so it runs before the program's own
handler.
"""

from __future__ import annotations

from harness.guard.fields import plain
from harness.guard.invocation import Access, Invocation

_LIST_OPTIONS = {"--files-from": "\n", "-T": "\n", "--files0-from": "\0"}
"""Option -> the separator of the names in its list (``-T`` is tar's short form)."""


def _lists(inv: Invocation) -> list[tuple[str, str]]:
    """(list field, separator) for each list option of ``inv``; cpio reads stdin."""
    found: list[tuple[str, str]] = []
    args = [plain(arg) for arg in inv.args]
    for index, text in enumerate(args):
        option, equals, value = text.partition("=")
        if option in _LIST_OPTIONS and equals:
            found.append((value, _LIST_OPTIONS[option]))
        elif text in _LIST_OPTIONS and index + 1 < len(args):
            found.append((args[index + 1], _LIST_OPTIONS[text]))
        elif text.startswith("-T") and len(text) > 2 and inv.name == "tar":
            found.append((text[2:], "\n"))
    if inv.name == "cpio" and any(a.startswith(("-o", "-p", "--create", "--pass")) for a in args):
        found.append(("-", "\n"))
    return found


def touch_listed(inv: Invocation) -> None:
    """Check the names in each list ``inv`` reads, when the guard knows the list's text."""
    for field, separator in _lists(inv):
        text = inv.stdin.text if field in ("-", "/dev/stdin") else inv.known_content(field)
        for name in (text or "").split(separator):
            if name.strip():
                inv.touch(name.strip("\n"), Access.READ)
