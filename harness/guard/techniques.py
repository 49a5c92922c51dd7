"""How a command reached a virtual path, or why the guard refused it: ``Deny.technique``.

Each tag is short and stable (logs, metrics and the labelled test cases use them).
"""

from __future__ import annotations

from typing import Literal

Technique = Literal[
    # how a path into /memory, /skills or /incident was written
    "abs",  # literally, as an absolute path
    "redirect",  # as the target of a redirection
    "cd",  # relative to a working directory the command changed to
    "dotdot",  # with ``..`` climbing out of somewhere else
    "glob",  # a glob that matches it
    "brace",  # a brace expansion that produces it
    "var",  # a variable or parameter expansion
    "subst",  # a command or process substitution
    "quote",  # split by quotes or escapes
    "tilde",  # a tilde expansion
    "env",  # handed to a program through its environment
    "nested",  # inside code the command runs (``bash -c``, ``eval``, ``xargs sh -c`` …)
    "interp",  # inside an interpreter's program (``python -c``, ``awk`` …)
    # why a command was refused without a path
    "download-exec",  # runs downloaded or decoded text as code
    "decode-exec",
    "parse-error",
    "too-long",
    "too-deep",
    "too-complex",  # the analysis could not decide: it fails closed
]
