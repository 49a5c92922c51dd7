"""The fixture directory the Claude Code scenario runs on (the kit's, as Claude Code saw it).

``make_fixture(root)`` writes the same files with the same modification times as the
conformance kit's ``make_scenario.py`` did for the captures, so that listings ordered
by time come out in the same order on both sides.
"""

from __future__ import annotations

import os
from pathlib import Path

BASE_MTIME = 1_700_000_000
_TEXT = {
    "a.txt": "alpha\nbeta\n\tgamma tab\ndelta\nepsilon\n",
    "b.txt": "never read\n",
    "dup.txt": "foo\nbar\nfoo\n",
    "empty.txt": "",
    "long.txt": "".join(f"line {i}\n" for i in range(1, 3001)),
    "wide.txt": "short\n" + "x" * 3000 + "\nafter\n",
    "stale.txt": "one\ntwo\n",
    "sub/x.py": "def f():\n    return 'OOM killer'\n",
    "sub/y.md": "# Notes\nOOM seen at 10:00\nnothing\nOOM again\n",
    "sub/deeper/z.py": "import os\n# OOM\n",
    "nonl.txt": "no newline at end",
    "crlf.txt": "one\r\ntwo\r\n",
    "CLAUDE.md": "# Project memory\nAlways answer briefly.\n",
    ".claude/skills/restart-pods/SKILL.md": (
        "---\nname: restart-pods\ndescription: Restart crash-looping pods safely. Use when "
        "pods are in CrashLoopBackOff.\n---\n\n# Restart pods\n1. kubectl get pods\n"
    ),
    **{f"many/f{i:03d}.log": f"ERROR {i}\n" for i in range(120)},
    "many/big.log": "".join(f"ERROR line {i}\n" for i in range(300)),
    "huge.txt": "".join(f"{i:05d} " + "y" * 94 + "\n" for i in range(3000)),
}
_BINARY = {"bin.dat": b"\x00\x01\x02binary\x00data" * 10}
SKILL_PATH = ".claude/skills/restart-pods/SKILL.md"


def make_fixture(root: Path) -> None:
    """Write the fixture under ``root``: every file at ``BASE_MTIME``, then the three
    sources 10 s apart and the 120 logs 1 s apart (oldest first), as the captures had."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in _TEXT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for name, data in _BINARY.items():
        (root / name).write_bytes(data)
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (BASE_MTIME, BASE_MTIME))
    for i, name in enumerate(("sub/x.py", "sub/y.md", "sub/deeper/z.py")):
        at = BASE_MTIME + 10 * (i + 1)
        os.utime(root / name, (at, at))
    for i in range(120):
        at = BASE_MTIME + 100 + i
        os.utime(root / f"many/f{i:03d}.log", (at, at))
