"""The roots the file tools serve, and the advice for a path outside them.

Read, Write and Edit reach ``/workspace`` (the sandbox's working directory, served by
the sandbox's file API) and the shared trees ``/memory``, ``/skills`` and
``/incident`` (served from the database). Any other absolute path (``/etc/hosts``,
``/tmp/x``, ``/``) is a tool error the model can act on: Bash sees the rest of the
sandbox. A path that looks like a shared root but is not one (``/Memory/x``, a
Cyrillic ``/memоry/x``) gets a "did you mean".
"""

from __future__ import annotations

import unicodedata

from harness.vfs import VIRTUAL_ROOTS, WORKSPACE

# Letters of other scripts that render like ASCII ones (a small slice of Unicode's
# confusables.txt, enough for the names of our roots).
_LOOK_ALIKES = str.maketrans(
    {
        "а": "a", "с": "c", "е": "e", "і": "i", "ј": "j", "к": "k", "м": "m",
        "о": "o", "р": "p", "ѕ": "s", "у": "y", "х": "x", "ԁ": "d", "ո": "n",
        "ο": "o", "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "υ": "u",
    }
)  # fmt: skip
_ROOT_NAMES = (*(root.lstrip("/") for root, _ in VIRTUAL_ROOTS), WORKSPACE.lstrip("/"))


def in_workspace(path: str) -> bool:
    """True for ``/workspace`` and the paths under it (``path`` is normalised).

    >>> in_workspace("/workspace/a"), in_workspace("/workspaces"), in_workspace("/etc")
    (True, False, False)
    """
    return path == WORKSPACE or path.startswith(WORKSPACE + "/")


def meant_root(path: str) -> str | None:
    """The root ``path`` probably meant when its first folder only looks like one.

    >>> meant_root("/Memory/x.md"), meant_root("/mem\\u043ery/x"), meant_root("/etc/hosts")
    ('/memory/x.md', '/memory/x', None)
    """
    first, _, rest = path.lstrip("/").partition("/")
    skeleton = unicodedata.normalize("NFKC", first).casefold().translate(_LOOK_ALIKES)
    if skeleton in _ROOT_NAMES and skeleton != first:
        return f"/{skeleton}" + (f"/{rest}" if rest else "")
    return None


def outside_roots(path: str, tool: str) -> str:
    """The error text for ``tool`` on a sandbox path outside ``/workspace``."""
    guess = meant_root(path)
    if guess is not None:
        return (
            f"{path} is not a path {tool} can use. Did you mean {guess}? Paths are "
            "case-sensitive and must be typed in plain ASCII letters."
        )
    where = (
        f"{tool} reaches {WORKSPACE} (the sandbox's working directory) and the shared "
        "trees /memory, /skills and /incident."
    )
    if tool == "Read":
        advice = (
            f"To look at another file of the sandbox, use Bash (for example `cat {path}` or "
            f"`head -n 100 {path}`), or copy it under {WORKSPACE} first."
        )
    else:
        advice = f"Write the file under {WORKSPACE} instead (Bash can move it afterwards)."
    return f"{path} is outside the paths {tool} can use. {where} {advice}"
