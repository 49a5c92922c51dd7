"""Roles for everyday file and text utilities (coreutils and friends).

Three kinds of program live here:

- *pure* programs whose arguments are text, never files (``echo``, ``printf``,
  ``basename``, ``logger``): a path in their arguments is a mention;
- file tools, whose operands are paths, with the kind of access that decides which file
  tool a refusal recommends (``ls`` lists → Glob, ``tee`` writes → Write);
- stream tools whose output the guard can compute from their input, so a later
  ``| xargs cat`` or ``| sh`` sees the text (``echo``, ``printf``, ``cat``, ``base64 -d``,
  ``rev``). Decoded text is tainted: running it is refused by policy.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
from collections.abc import Callable

from harness.guard.fields import plain
from harness.guard.invocation import Access, Invocation
from harness.guard.options import has_option, names, operands, option_values, parse_args, spec
from harness.guard.programs.generic import generic, touch_all
from harness.guard.state import Stream
from harness.guard.text import ansi_c_decode

Handler = Callable[[Invocation], None]

PURE_COMMANDS = names(
    ": true false expr seq sleep kill wall notify-send yes let shift getopts wait jobs "
    "umask ulimit hash type which whereis help alias unalias history hostname uname id "
    "whoami groups uptime free nproc ps pgrep pkill pidof top htop cal tput clear stty "
    "tty printenv dig nslookup host ping ping6 traceroute mtr whois ss netstat ip "
    "ifconfig systemctl service dmesg lscpu lsmem vmstat iostat mpstat numfmt factor "
    "timedatectl who w getent sync arch locale"
)
_ACCESS = {
    Access.LIST: "ls dir vdir tree du stat file lsattr getfacl namei readlink realpath",
    Access.WRITE: "mkdir touch rm rmdir install truncate chmod chown chgrp shred unlink "
    "mkfifo mknod sponge dd ln",
    Access.EDIT: "vi vim nvim nano emacs ed ex patch",
    Access.EXECUTE: "chroot",
}
_SORT = spec("-k -t -o -S -T --key --field-separator --output --buffer-size")
_PASS_THROUGH = frozenset({"head", "tail", "sort", "uniq", "fold", "nl", "tac"})
_DECODERS = frozenset({"base64", "base32", "basenc"})
FILE_TESTS = names("-a -b -c -d -e -f -g -G -h -k -L -N -O -p -r -s -S -u -w -x")
"""test(1) operators whose operand is a file."""
_FILE_COMPARISONS = frozenset({"-ef", "-nt", "-ot"})


def _pure(inv: Invocation) -> None:
    return None


def _with_access(access: Access) -> Handler:
    def handle(inv: Invocation) -> None:
        generic(inv, access)

    return handle


def _copy(inv: Invocation) -> None:
    parsed = parse_args(inv.args, spec("-t", "--target-directory", "-S", "--suffix"))
    files = operands(parsed)
    targets = option_values(parsed, "-t", "--target-directory")
    if not targets and files:
        targets = files[-1:]
        files = files[:-1]
    touch_all(inv, files, Access.READ)
    touch_all(inv, targets, Access.WRITE)


def _echo(inv: Invocation) -> None:
    args = list(inv.args)
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", plain(args[0])):
        flags = plain(args.pop(0))
        newline = newline and "n" not in flags
        escapes = "e" in flags or (escapes and "E" not in flags)
    text = " ".join(plain(arg) for arg in args)
    if escapes:
        text = ansi_c_decode(text)
    inv.output(Stream(text + ("\n" if newline else "")))


def _printf(inv: Invocation) -> None:
    args = [plain(arg) for arg in inv.args]
    target = None
    if len(args) >= 2 and args[0] == "-v":
        target, args = args[1], args[2:]
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        return
    text = printf_format(args[0], args[1:])
    if target is not None:
        inv.assign(target, frozenset({text}))
    else:
        inv.output(Stream(text))


def printf_format(template: str, values: list[str]) -> str:
    r"""Render a printf ``template`` (``%s %d %b %c %%`` and ``\`` escapes) with ``values``.

    >>> printf_format('/%s/%s', ['memory', 'notes.md'])
    '/memory/notes.md'
    """
    template = ansi_c_decode(template.replace("\\'", "'"))
    pieces = re.split(r"(%[-+ 0#]*\d*(?:\.\d+)?[a-zA-Z%])", template)
    conversions = sum(1 for p in pieces if p.startswith("%") and p != "%%")
    out: list[str] = []
    queue = list(values)
    while True:
        for piece in pieces:
            if piece == "%%":
                out.append("%")
            elif piece.startswith("%") and len(piece) > 1:
                value = queue.pop(0) if queue else ""
                out.append(ansi_c_decode(value) if piece.endswith("b") else value)
            else:
                out.append(piece)
        if not queue or conversions == 0:
            return "".join(out)


def _cat(inv: Invocation) -> None:
    files = operands(parse_args(inv.args, spec()))
    touch_all(inv, [f for f in files if plain(f) != "-"], Access.READ)
    if not files:
        inv.output(inv.stdin)
        return
    parts = [inv.stdin.text if plain(f) == "-" else inv.known_content(f) for f in files]
    if all(part is not None for part in parts):
        inv.output(Stream("".join(part or "" for part in parts)))


def _pass_through(inv: Invocation) -> None:
    generic(inv, Access.READ)
    parsed = parse_args(inv.args, spec("-n -c -k -t -o -s -w -T"))
    if inv.name == "sort":  # ``-oFILE`` too: the file sort writes, from the current directory
        for value in option_values(parse_args(inv.args, _SORT), "-o", "--output"):
            inv.touch(value, Access.WRITE)
    if inv.name == "uniq" and len(operands(parsed)) > 1:  # uniq [INPUT [OUTPUT]]
        inv.touch(operands(parsed)[1], Access.WRITE)
    if not operands(parsed):
        inv.output(inv.stdin)


def _path_name(inv: Invocation) -> None:
    """basename / dirname: pure string functions, computed for ``$(dirname …)``."""
    parsed = parse_args(inv.args, spec("-s --suffix"))
    names = [plain(field) for field in operands(parsed)]
    if inv.name == "dirname":
        lines = [posixpath.dirname(name.rstrip("/")) or "." for name in names]
    else:
        suffixes = [plain(v) for v in option_values(parsed, "-s", "--suffix")]
        if not suffixes and len(names) == 2 and not has_option(parsed, "-a", "--multiple"):
            names, suffixes = names[:1], names[1:]
        lines = [_basename(name, suffixes[0] if suffixes else "") for name in names]
    inv.output(Stream("".join(line + "\n" for line in lines)))


def _basename(name: str, suffix: str) -> str:
    base = posixpath.basename(name.rstrip("/")) or "/"
    return base[: -len(suffix)] if suffix and base.endswith(suffix) and base != suffix else base


def _tr(inv: Invocation) -> None:
    """tr SET1 [SET2] with ranges, -d (delete); anything fancier gives unknown output."""
    texts = [plain(field) for field in inv.args]
    flags = "".join(t[1:] for t in texts if t.startswith("-") and len(t) > 1)
    sets = [_tr_set(t) for t in texts if not t.startswith("-") or len(t) == 1]
    text = inv.stdin.text
    if text is None or set(flags) - {"d", "s"} or not sets:
        return
    if "d" in flags:
        result = "".join(char for char in text if char not in sets[0])
    elif len(sets) == 2 and sets[1]:
        table = {ord(a): sets[1][min(i, len(sets[1]) - 1)] for i, a in enumerate(sets[0])}
        result = text.translate(table)
    else:
        return
    inv.output(Stream(result, inv.stdin.taint))


def _tr_set(text: str) -> str:
    text = ansi_c_decode(text)
    return re.sub(
        r"(.)-(.)",
        lambda m: "".join(chr(c) for c in range(ord(m.group(1)), ord(m.group(2)) + 1)),
        text,
    )


def _tee(inv: Invocation) -> None:
    touch_all(inv, operands(parse_args(inv.args, spec())), Access.WRITE)
    inv.output(inv.stdin)


def _decoder(inv: Invocation) -> None:
    parsed = parse_args(inv.args, spec("-w", "--wrap"))
    files = operands(parsed)
    touch_all(inv, files, Access.READ)
    if not has_option(parsed, "-d", "--decode", "-D"):
        return
    text = inv.stdin.text if not files else None
    inv.output(Stream(_decode(inv.name, text), taint="decode"))


def _decode(name: str, text: str | None) -> str | None:
    if text is None:
        return None
    try:
        raw = base64.b32decode("".join(text.split())) if name == "base32" else None
        raw = raw if raw is not None else base64.b64decode("".join(text.split()) + "==")
    except (binascii.Error, ValueError):
        return None
    return raw.decode("utf-8", "replace")


def _opaque_decoder(inv: Invocation) -> None:
    generic(inv, Access.READ)
    inv.output(Stream(None, taint="decode"))


def _rev(inv: Invocation) -> None:
    files = operands(parse_args(inv.args, spec()))
    touch_all(inv, files, Access.READ)
    text = inv.stdin.text
    if not files and text is not None:
        lines = text.split("\n")
        inv.output(Stream("\n".join(line[::-1] for line in lines), inv.stdin.taint))


def _test(inv: Invocation) -> None:
    args = list(inv.args)
    if inv.name == "[" and args and plain(args[-1]) == "]":
        args.pop()
    for index, field in enumerate(args):
        text = plain(field)
        if text in FILE_TESTS and index + 1 < len(args):
            inv.touch(args[index + 1], Access.READ)
        elif text in _FILE_COMPARISONS and 0 < index < len(args) - 1:
            inv.touch(args[index - 1], Access.READ)
            inv.touch(args[index + 1], Access.READ)


def _tar(inv: Invocation) -> None:
    args = list(inv.args)
    if args and not plain(args[0]).startswith("-"):
        args[0] = "-" + args[0]
    takes = spec(
        "-f -C -T -X -b -H -I -L -N -V -g -K",
        "--file --directory --files-from --exclude-from --use-compress-program",
        "--exclude --transform --owner --group --mode --format --label",
    )
    base: str | None = None
    for arg in parse_args(args, takes):
        if arg.value is None:
            continue
        if arg.option in ("-C", "--directory"):
            inv.touch(arg.value, Access.CHDIR, base=base)
            relative = base is not None and not plain(arg.value).startswith("/")
            base = f"{plain(base)}/{plain(arg.value)}" if relative and base else arg.value
        elif arg.option in ("-f", "--file", "-T", "--files-from", "-X", "--exclude-from", "-g"):
            inv.touch(arg.value, Access.READ)
        elif arg.option is None:
            inv.touch(arg.value, Access.READ, base=base)


def file_handlers() -> dict[str, Handler]:
    """The handlers of this module by command name."""
    handlers: dict[str, Handler] = {name: _pure for name in PURE_COMMANDS}
    for access, command_names in _ACCESS.items():
        handlers.update({name: _with_access(access) for name in names(command_names)})
    handlers.update({name: _pass_through for name in _PASS_THROUGH})
    handlers.update({name: _decoder for name in _DECODERS})
    for name in ("xxd", "uudecode", "zcat", "gunzip", "bzcat", "xzcat", "zstdcat", "openssl"):
        handlers[name] = _opaque_decoder
    handlers.update(
        {
            "cp": _copy,
            "mv": _copy,
            "echo": _echo,
            "printf": _printf,
            "cat": _cat,
            "tee": _tee,
            "rev": _rev,
            "test": _test,
            "[": _test,
            "tar": _tar,
            "basename": _path_name,
            "dirname": _path_name,
            "tr": _tr,
        }
    )
    return handlers
