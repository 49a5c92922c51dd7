"""``warroom skills import|export``: Claude Code skill folders ↔ an org's ``/skills``.

On disk a skill is a folder ``<name>/`` holding ``SKILL.md`` (YAML frontmatter
``name`` equal to the folder, and ``description``) plus any extra files; in the store
it is ``/skills/<name>/SKILL.md`` and ``/skills/<name>/<extra files>`` (docs/architecture.md
§6). Import takes a directory of such folders, or one folder. A skill whose
``SKILL.md`` is invalid is not imported at all, and its report lists what to fix.
Files that are binary, over the store's size cap, symbolic links or hidden (a name
starting with ``.``) are skipped with a reason; the rest of the skill is imported,
``SKILL.md`` last, so a skill shows up in the index only once its files are in.
Writing the same content again makes no new version.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from memory_store import (
    DEFAULT_LIMITS,
    FileStore,
    InvalidSkill,
    Namespace,
    Origin,
    Scope,
    StoreError,
    validate_skill,
)

__all__ = ["SKILL_FILE", "SkillReport", "export_skills", "import_skills"]

SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class SkillReport:
    """What happened to one skill folder.

    Attributes:
        name: the folder name.
        written: store paths (``/<name>/…``) whose content changed.
        unchanged: store paths that already held this content.
        skipped: ``(relative path, reason)`` for files left out.
        problems: what makes ``SKILL.md`` invalid; non-empty means nothing was imported.
    """

    name: str
    written: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the skill was imported (or exported)."""
        return not self.problems


async def import_skills(
    store: FileStore,
    org_id: str,
    source: Path,
    *,
    actor: str = "cli",
    max_file_bytes: int = DEFAULT_LIMITS.max_file_bytes,
) -> list[SkillReport]:
    """Import every skill folder under ``source`` (or ``source`` itself) into the org.

    Args:
        source: a directory of ``<name>/SKILL.md`` folders, or one such folder.
        actor: recorded as the author of every revision.
        max_file_bytes: files larger than this are skipped unread (the store's cap).

    Returns:
        One report per folder, by name (folders without ``SKILL.md`` are not skills
        and are left out).

    Raises:
        FileNotFoundError: ``source`` does not exist ("no such directory: …").
        NotADirectoryError: ``source`` is not a directory ("not a directory: …").
        DatabaseUnavailable: the store could not be reached.
    """
    ns = Namespace(org_id, Scope.SKILLS)
    origin = Origin(actor)
    folders = await asyncio.to_thread(_read_source, source, max_file_bytes)
    return [await _import_one(store, ns, folder, origin) for folder in folders]


async def export_skills(store: FileStore, org_id: str, target: Path) -> list[SkillReport]:
    """Write every file of the org's ``/skills`` under ``target`` (created if needed).

    Existing files with the same paths are overwritten; others are left alone.

    Returns:
        One report per top-level folder, by name (``written`` lists every file).

    Raises:
        DatabaseUnavailable: the store could not be reached.
        OSError: ``target`` could not be written.
    """
    ns = Namespace(org_id, Scope.SKILLS)
    contents: dict[str, str] = {}
    for entry in await store.index(ns):
        contents[entry.path] = (await store.read(ns, entry.path)).content
    await asyncio.to_thread(_write_files, target, contents)
    by_skill: dict[str, list[str]] = {}
    for path in contents:
        by_skill.setdefault(PurePosixPath(path).parts[1], []).append(path)
    return [SkillReport(name, written=tuple(paths)) for name, paths in sorted(by_skill.items())]


@dataclass(frozen=True)
class _Folder:
    """A skill folder read from disk: text files by relative POSIX path, skipped files."""

    name: str
    files: dict[str, str]
    skipped: list[tuple[str, str]]


def _read_source(source: Path, max_file_bytes: int) -> list[_Folder]:
    if not source.exists():
        raise FileNotFoundError(f"no such directory: {source}")
    if not source.is_dir():
        raise NotADirectoryError(f"not a directory: {source}")
    folders = []
    for folder in _skill_folders(source):
        files, skipped = _readable_files(folder, max_file_bytes)
        folders.append(_Folder(folder.name, files, skipped))
    return folders


def _write_files(target: Path, contents: dict[str, str]) -> None:
    target.mkdir(parents=True, exist_ok=True)  # even for no skills: export → import works
    for path, content in contents.items():
        destination = target.joinpath(*PurePosixPath(path).parts[1:])
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text(content, encoding="utf-8")


def _skill_folders(source: Path) -> list[Path]:
    if (source / SKILL_FILE).is_file():
        return [source]
    return sorted(p for p in source.iterdir() if p.is_dir() and (p / SKILL_FILE).is_file())


async def _import_one(
    store: FileStore, ns: Namespace, folder: _Folder, origin: Origin
) -> SkillReport:
    name, files, skipped = folder.name, folder.files, list(folder.skipped)
    if SKILL_FILE not in files:
        reason = dict(skipped).get(SKILL_FILE, "missing")
        return SkillReport(name, skipped=tuple(skipped), problems=(f"{SKILL_FILE}: {reason}",))
    try:
        validate_skill(f"/{name}/{SKILL_FILE}", files[SKILL_FILE])
    except InvalidSkill as exc:
        return SkillReport(name, skipped=tuple(skipped), problems=tuple(exc.problems))
    written: list[str] = []
    unchanged: list[str] = []
    for relative in sorted(files, key=lambda r: (r == SKILL_FILE, r)):
        path = f"/{name}/{relative}"
        try:
            result = await store.write(ns, path, files[relative], origin, expected_version=None)
        except StoreError as exc:
            if relative == SKILL_FILE:
                return SkillReport(name, tuple(written), (), tuple(skipped), (str(exc),))
            skipped.append((relative, str(exc)))
            continue
        (unchanged if result.unchanged else written).append(path)
    return SkillReport(name, tuple(written), tuple(unchanged), tuple(skipped))


def _readable_files(
    folder: Path, max_file_bytes: int
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Text files of ``folder`` by relative POSIX path, and the skipped ones with a reason."""
    files: dict[str, str] = {}
    skipped: list[tuple[str, str]] = []
    for path in _walk(folder):
        relative = path.relative_to(folder).as_posix()
        reason = _skip_reason(path, max_file_bytes)
        if reason is None:
            try:
                files[relative] = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                reason = "binary (not UTF-8 text)"
        if reason is not None:
            skipped.append((relative, reason))
        elif "\x00" in files[relative]:
            del files[relative]
            skipped.append((relative, "binary (contains NUL bytes)"))
    return files, skipped


def _walk(folder: Path) -> Iterator[Path]:
    """Every entry under ``folder``, depth first by name; hidden or linked directories are
    yielded (to be skipped), not entered."""
    for path in sorted(folder.iterdir()):
        if path.is_dir() and not path.is_symlink() and not path.name.startswith("."):
            yield from _walk(path)
        else:
            yield path


def _skip_reason(path: Path, max_file_bytes: int) -> str | None:
    if path.name.startswith("."):
        return "hidden"
    if path.is_symlink():
        return "symbolic link (not followed)"
    if not path.is_file():
        return "not a regular file"
    size = path.stat().st_size
    if size > max_file_bytes:
        return f"{size} bytes, over the {max_file_bytes}-byte limit"
    return None
