"""Path routing: which store serves a path the model names (docs/architecture.md §6).

The mount table is sorted longest prefix first; ``resolve`` is pure.

>>> resolve("/memory/teams/payments.md")
Resolved(mount=<Mount.MEMORY: 'memory'>, path='/teams/payments.md')
>>> resolve("/incident")
Resolved(mount=<Mount.INCIDENT: 'incident'>, path='/')
>>> resolve("/workspace/logs/../app.log")
Resolved(mount=<Mount.SANDBOX: 'sandbox'>, path='/workspace/app.log')
>>> resolve("/incidents/2026-11-02-C1/summary.md")
Resolved(mount=<Mount.INCIDENTS: 'incidents'>, path='/2026-11-02-C1/summary.md')
>>> resolve("/memoryless/x").mount
<Mount.SANDBOX: 'sandbox'>
>>> resolve("/skills/../memory/x.md")
Traceback (most recent call last):
...
harness.vfs.PathError: path escapes its mount root: '/skills/../memory/x.md'
"""

from __future__ import annotations

import posixpath
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from memory_store import READ_ONLY_TREES, Scope


class PathError(ValueError):
    """A path the model gave cannot be used; the message is written for the model."""


class Mount(StrEnum):
    """Where a path lives. The first three are org files in the database; ``INCIDENTS`` is
    the org's past incidents, read-only (``harness.recall.mount``)."""

    MEMORY = "memory"
    SKILLS = "skills"
    INCIDENT = "incident"
    INCIDENTS = "incidents"
    SANDBOX = "sandbox"


VIRTUAL_ROOTS: tuple[tuple[str, Mount], ...] = tuple(
    sorted(
        [(f"/{scope.value}", Mount(scope.value)) for scope in Scope]
        + [(f"/{name}", Mount(name)) for name in READ_ONLY_TREES]
    )
)
"""The one table of virtual roots: one per ``memory_store.Scope``, and the read-only trees
(``memory_store.READ_ONLY_TREES``: ``/incidents``), sorted. The guard, the tools' root checks
and the jail's stub directories follow the same names."""
WORKSPACE = "/workspace"


@dataclass(frozen=True)
class Resolved:
    """A routed path: ``path`` is relative to the mount root for virtual mounts
    (always starting with ``/``), and the absolute sandbox path for ``Mount.SANDBOX``."""

    mount: Mount
    path: str

    @property
    def is_virtual(self) -> bool:
        """True for the database-backed mounts."""
        return self.mount is not Mount.SANDBOX

    def display(self) -> str:
        """The path as the model sees it (``/memory/x.md``, ``/workspace/a``)."""
        if self.mount is Mount.SANDBOX:
            return self.path
        return f"/{self.mount.value}" + ("" if self.path == "/" else self.path)


def _check_text(path: str) -> str:
    if not path:
        raise PathError("path is empty")
    path = unicodedata.normalize("NFC", path)
    if any(unicodedata.category(ch) == "Cc" for ch in path):
        raise PathError(f"path contains control characters: {path!r}")
    if not path.startswith("/"):
        raise PathError(f"path must be absolute (start with /): {path!r}")
    return path


def _mount_of(path: str) -> tuple[Mount, str] | None:
    for root, mount in VIRTUAL_ROOTS:
        if path == root or path.startswith(root + "/"):
            return mount, root
    return None


def resolve(path: str) -> Resolved:
    """Route an absolute path to its mount.

    NFC-normalises, collapses ``//``, resolves ``.`` and ``..``. A ``..`` that
    leaves a virtual mount (``/skills/../memory``) is an error rather than a
    silent re-route, so a path never changes stores by arithmetic.

    Raises:
        PathError: empty, relative, control characters, or escapes its mount root.
    """
    raw = _check_text(path)
    collapsed = "/" + "/".join(part for part in raw.split("/") if part not in ("", "."))
    normal = posixpath.normpath(raw)
    normal = "/" + normal.lstrip("/")
    first = _mount_of(collapsed.split("/..", 1)[0] if "/.." in collapsed else collapsed)
    final = _mount_of(normal)
    if first is not None and (final is None or final[0] is not first[0]):
        raise PathError(f"path escapes its mount root: {path!r}")
    if final is None:
        return Resolved(Mount.SANDBOX, normal)
    mount, root = final
    rest = normal[len(root) :] or "/"
    return Resolved(mount, rest)
