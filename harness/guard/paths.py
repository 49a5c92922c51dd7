"""Where a shell path lands: resolution against the simulated working directory.

A path is virtual when its first component, after resolution, is exactly ``memory``,
``skills``, ``incident`` or ``incidents`` (whole component, case-sensitive): ``/memory/x`` and
``/tmp/../memory`` are, ``/memory-dumps``, ``/Memory``, ``/sys/fs/cgroup/memory`` and
``./memory`` (from ``/workspace``) are not. Resolution is lexical, like bash's logical
``cd``: ``.`` and ``//`` collapse, ``..`` drops the component before it.

A glob component matches the roots with ``fnmatch`` semantics (``/mem?ry``,
``/[ms]kills``, ``/sk*``). A *root sweep* is not a touch: when every component is a
pattern that matches any name at all (``/*``, ``/*/*``) nothing singles out a virtual
namespace (``du -sh /*`` is an ordinary command).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from harness.guard.fields import TAINT, UNKNOWN, glob_pattern, has_glob, plain
from memory_store import READ_ONLY_TREES, Scope

VIRTUAL_ROOTS = (*(scope.value for scope in Scope), *READ_ONLY_TREES)  # the one table
"""The first path components that live in the database, not on the sandbox filesystem."""

_ORDINARY_NAMES = ("bin", "etc", "usr", "var", "tmp", "proc", "workspace", "x", *VIRTUAL_ROOTS)


@dataclass(frozen=True)
class VirtualHit:
    """A field that resolves into a virtual namespace.

    Attributes:
        path: the resolved path as the model would recognise it (``/memory/notes.md``;
            glob components shown as written).
        via_glob: the first component was a glob pattern.
        via_dotdot: resolution removed a ``..``.
        base: the working directory a relative field was resolved against ("" if absolute).
    """

    path: str
    via_glob: bool
    via_dotdot: bool
    base: str


def _components(path: str) -> tuple[list[str], bool]:
    parts: list[str] = []
    dotdot = False
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            dotdot = True
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return parts, dotdot


CLIMB_TO_ROOT = 8
"""Leading ``..`` components that reach ``/`` from any realistic unknown directory."""


def _climbs_to_root(field: str) -> bool:
    parts = field.split("/")
    return len(parts) > CLIMB_TO_ROOT and all(p == ".." for p in parts[:CLIMB_TO_ROOT])


def _matches_everything(component: str) -> bool:
    pattern = glob_pattern(component)
    return all(fnmatch.fnmatchcase(name, pattern) for name in _ORDINARY_NAMES)


def _first_is_virtual(parts: list[str]) -> tuple[bool, bool]:
    """Return (hit, via_glob) for resolved components."""
    if not parts or UNKNOWN in parts[0]:
        return False, False
    first = parts[0]
    if not has_glob(first):
        return plain(first) in VIRTUAL_ROOTS, False
    pattern = glob_pattern(first)
    if not any(fnmatch.fnmatchcase(root, pattern) for root in VIRTUAL_ROOTS):
        return False, False
    sweep = all(_matches_everything(part) for part in parts)
    return not sweep, True


def _resolutions(field: str, cwds: frozenset[str]) -> list[tuple[str, list[str], bool]]:
    """(base, components, removed-a-dotdot) for each way ``field`` resolves."""
    field = field.replace(TAINT, "")
    if not field or field.startswith(UNKNOWN):
        return []
    if field.startswith("/"):
        bases = [""]
    else:
        bases = sorted(cwd for cwd in cwds if not cwd.startswith(UNKNOWN))
        if len(bases) < len(cwds) and _climbs_to_root(field):
            bases.append("/")
    resolved = []
    for base in bases:
        parts, dotdot = _components(_physical(f"{base}/{field}", cwds))
        resolved.append((base, parts, dotdot))
    return resolved


_PROC_ROOT = re.compile(r"^/+proc/+(?:self|thread-self|[0-9]+)/+root(?=/|$)")
_PROC_CWD = re.compile(r"^/+proc/+(?:self|thread-self)/+cwd(?=/|$)")


def _physical(path: str, cwds: frozenset[str]) -> str:
    """Follow the ``/proc`` links that reach the filesystem root or the working directory.

    ``/proc/self/root/memory`` is ``/memory``; ``/proc/self/cwd/../skills`` is
    ``/skills`` from ``/workspace``. Other ``..`` stays lexical, as bash and the corpus
    labels treat it (``/bin/../memory`` is ``/memory``).
    """
    path = _PROC_ROOT.sub("", path, count=1) or "/"
    known = sorted(cwd for cwd in cwds if not cwd.startswith(UNKNOWN))
    if known and _PROC_CWD.match(path):
        path = _PROC_CWD.sub(known[0].replace("\\", "\\\\"), path, count=1)
    return path


def virtual_target(field: str, cwds: frozenset[str]) -> VirtualHit | None:
    """Where ``field`` lands if used as a path from any of ``cwds``, when that is virtual.

    Args:
        field: an encoded field (see ``bash_fields``).
        cwds: possible working directories (absolute; ``UNKNOWN`` members are skipped).

    Returns:
        the hit, or None when no resolution reaches ``/memory``, ``/skills`` or
        ``/incident`` (or when the field starts with something unknowable).

    >>> virtual_target("../skills/x", frozenset({"/workspace"})).path
    '/skills/x'
    >>> virtual_target("memory/x", frozenset({"/workspace"})) is None
    True
    """
    for base, parts, dotdot in _resolutions(field, cwds):
        hit, via_glob = _first_is_virtual(parts)
        if hit:
            shown = "/" + "/".join(plain(part) for part in parts)
            return VirtualHit(shown, via_glob, dotdot, base)
    return None


def glob_reads_virtual(field: str, cwds: frozenset[str]) -> VirtualHit | None:
    """The virtual directory bash itself would read to expand the glob in ``field``.

    Pathname expansion lists each directory holding a pattern component, whatever the
    command: ``echo /memory/*`` reads ``/memory``; ``echo /mem*`` only reads ``/``.

    >>> glob_reads_virtual("/memory/" + "\ue003", frozenset({"/"})).path
    '/memory/*'
    """
    if not has_glob(field):
        return None
    for base, parts, dotdot in _resolutions(field, cwds):
        hit, _via_glob = _first_is_virtual(parts)
        if hit and any(has_glob(part) for part in parts[1:]):
            shown = "/" + "/".join(plain(part) for part in parts)
            return VirtualHit(shown, True, dotdot, base)
    return None


def resolve_directory(field: str, cwds: frozenset[str]) -> frozenset[str]:
    """The directories ``cd field`` may reach from ``cwds`` (``UNKNOWN`` when not knowable).

    >>> sorted(resolve_directory("..", frozenset({"/workspace"})))
    ['/']
    """
    field = field.replace(TAINT, UNKNOWN)
    if UNKNOWN in field or has_glob(field):
        return frozenset({UNKNOWN})
    text = plain(field)
    if text.startswith("/"):
        return frozenset({_normal(text)})
    results = {UNKNOWN if cwd.startswith(UNKNOWN) else _normal(f"{cwd}/{text}") for cwd in cwds}
    return frozenset(results)


def _normal(path: str) -> str:
    parts, _ = _components(path)
    return "/" + "/".join(parts)
