"""Path normalisation for files inside a scope root.

Pure functions, no I/O. Paths are absolute *within the scope root* (``/teams/x.md``
under ``/memory``). We never URL-decode: ``%2e`` is two literal characters, not a dot.
Only NFC is applied (NFKC would turn look-alikes such as fullwidth ``．．`` into ``..``).
"""

from __future__ import annotations

import unicodedata

from memory_store.errors import CaseConflict, InvalidPath

MAX_PATH_CHARS = 1024
MAX_SEGMENT_CHARS = 255

# Unicode general categories refused anywhere in a path: control (Cc), invisible
# format characters such as bidi overrides and zero-width joiners (Cf), lone
# surrogates (Cs), and line/paragraph separators (Zl, Zp).
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def normalise_path(path: str) -> str:
    """Return the canonical form of an absolute path within a scope root.

    NFC-normalises, collapses ``//``, resolves ``.`` and ``..``, and drops a
    trailing ``/``. The root is ``"/"``.

    Raises:
        InvalidPath: empty or relative path; control or invisible characters; a ``..``
            that climbs above the scope root; over 1,024 chars or a name over 255 chars.

    >>> normalise_path("/teams//payments/./notes/../runbook.md")
    '/teams/payments/runbook.md'
    >>> normalise_path("/a/b/")
    '/a/b'
    >>> normalise_path("/%2e%2e/x")
    '/%2e%2e/x'
    >>> normalise_path("/．．/x")
    '/．．/x'
    >>> try:
    ...     normalise_path("/a/../../etc")
    ... except InvalidPath as exc:
    ...     print(exc.reason)
    escapes above the root of its scope ('..' climbs past '/'); use a path inside the scope
    """
    if _already_normal(path):
        return path
    if not path:
        raise InvalidPath(path, "the path is empty; give an absolute path such as /notes.md")
    if not path.startswith("/"):
        raise InvalidPath(path, "the path is relative; give an absolute path starting with /")
    _refuse_invisible(path)
    parts: list[str] = []
    for segment in unicodedata.normalize("NFC", path).split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                raise InvalidPath(
                    path,
                    "escapes above the root of its scope ('..' climbs past '/');"
                    " use a path inside the scope",
                )
            parts.pop()
            continue
        if len(segment) > MAX_SEGMENT_CHARS:
            raise InvalidPath(path, f"a name is longer than {MAX_SEGMENT_CHARS} characters")
        parts.append(segment)
    result = "/" + "/".join(parts)
    if len(result) > MAX_PATH_CHARS:
        raise InvalidPath(path, f"the path is longer than {MAX_PATH_CHARS} characters")
    return result


def normalise_file_path(path: str) -> str:
    """Like ``normalise_path``, for a path that must name a file (not the root, no trailing /).

    Raises:
        InvalidPath: as ``normalise_path``, or the path names the root or ends with ``/``.

    >>> normalise_file_path("/notes/./today.md")
    '/notes/today.md'
    """
    result = normalise_path(path)
    if result == "/":
        raise InvalidPath(path, "this is the root directory, not a file; name a file in it")
    if path.endswith("/"):
        raise InvalidPath(path, "a file path must not end with '/'")
    return result


def fold(path: str) -> str:
    """The case-insensitive key of a normalised path (Unicode casefold).

    >>> fold("/Teams/Straße.md")
    '/teams/strasse.md'
    """
    return path.casefold()


def ancestors(path: str) -> list[str]:
    """The directories above a normalised file path, outermost first, root excluded.

    >>> ancestors("/a/b/c.md")
    ['/a', '/a/b']
    """
    segments = path.split("/")[1:-1]
    return ["/" + "/".join(segments[: i + 1]) for i in range(len(segments))]


def is_under(path: str, prefix: str) -> bool:
    """True when ``path`` is ``prefix`` itself or inside the directory ``prefix``.

    >>> is_under("/a/b.md", "/a"), is_under("/ab.md", "/a"), is_under("/x", "/")
    (True, False, True)
    """
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def _already_normal(path: str) -> bool:
    """Whether ``path`` is its own canonical form, told by C-level string tests alone
    (the common case, on every read and write): printable ASCII (so NFC and the
    character checks leave it alone), absolute, no empty, ``.`` or ``..`` name (nor any
    name starting with ``.``, which takes the full way), no trailing ``/``, and short
    enough that no name or the whole can be over its limit."""
    return (
        len(path) <= MAX_SEGMENT_CHARS
        and path.startswith("/")
        and not path.endswith("/")
        and path.isascii()
        and path.isprintable()
        and "//" not in path
        and "/." not in path
    )


def _refuse_invisible(path: str) -> None:
    if path.isprintable():  # in C: no Cc, Cf, Cs, Zl or Zp character (nor other Z, C)
        return
    for char in path:
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise InvalidPath(
                path,
                f"contains the control or invisible character U+{ord(char):04X};"
                " use printable characters only",
            )


def check_tree(path: str, existing: list[str]) -> None:
    """Refuse a new file ``path`` that clashes with ``existing`` live file paths.

    Raises:
        CaseConflict: ``path``, or one of its directories, differs only by case from an
            existing file or directory (``existing_path`` names the existing spelling).
        InvalidPath: ``path`` is an existing directory, or one of its directories is a file.

    >>> try:
    ...     check_tree("/notes/b.md", ["/Notes/a.md"])
    ... except CaseConflict as exc:
    ...     print(exc.existing_path)
    /Notes
    """
    mine = [*ancestors(path), path]
    for other in existing:
        for ours, theirs in zip(mine, [*ancestors(other), other], strict=False):
            if ours != theirs:
                if fold(ours) == fold(theirs):
                    raise CaseConflict(path, theirs)
                break
        if other.startswith(path + "/"):
            raise InvalidPath(path, f"it is a directory (it holds {other}); name a file")
        if path.startswith(other + "/"):
            raise InvalidPath(path, f"{other} is a file, so it cannot hold other files")
