"""``warroom skills import|export``: Claude Code skill folders ↔ an org's ``/skills``.

On disk a skill is a folder ``<name>/`` holding ``SKILL.md`` plus any extra files; in
the store it is ``/skills/<name>/SKILL.md`` and ``/skills/<name>/<extra files>``
(docs/architecture.md §6), each file with its permission bits (scripts stay executable
on export). Import takes a directory of such folders (category folders one level down
included), or one folder; ``skill_folders`` says which folders are passed over and
why. A skill whose ``SKILL.md`` is invalid is not imported at all, and its report lists
what to fix. Files that cannot be stored are skipped with a reason; the rest of the
skill is imported, ``SKILL.md`` last, so a skill shows up in the index only once its
files are in. Writing the same content again makes no new version.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bot.cli.skill_folders import SKILL_FILE, Folder, Passed, find
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


@dataclass(frozen=True)
class SkillReport:
    """What happened to one skill folder.

    Attributes:
        name: the folder name.
        written: store paths (``/<name>/…``) whose content changed.
        unchanged: store paths that already held this content.
        skipped: ``(relative path, reason)`` for files left out (path "" for a folder
            that is not a skill at all).
        problems: why the skill could not be imported; non-empty means nothing was.
        source: where the folder was when not directly in the source ("ops/pdf").
    """

    name: str
    written: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    problems: tuple[str, ...] = ()
    source: str = ""

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
        One report per folder, by name, including the folders passed over (a
        folder that is not a skill has one skipped entry with path "").

    Raises:
        FileNotFoundError: ``source`` does not exist ("no such directory: …").
        NotADirectoryError: ``source`` is not a directory ("not a directory: …").
        DatabaseUnavailable: the store could not be reached.
    """
    ns = Namespace(org_id, Scope.SKILLS)
    origin = Origin(actor)
    folders, passed = await asyncio.to_thread(find, source, max_file_bytes)
    reports = [await _import_one(store, ns, folder, origin) for folder in folders]
    reports += [_report_passed(p) for p in passed]
    return sorted(reports, key=lambda r: r.name)


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
    contents: dict[str, tuple[str, int]] = {}
    for entry in await store.index(ns):
        contents[entry.path] = ((await store.read(ns, entry.path)).content, entry.mode)
    await asyncio.to_thread(_write_files, target, contents)
    by_skill: dict[str, list[str]] = {}
    for path in contents:
        by_skill.setdefault(PurePosixPath(path).parts[1], []).append(path)
    return [SkillReport(name, written=tuple(paths)) for name, paths in sorted(by_skill.items())]


def _write_files(target: Path, contents: dict[str, tuple[str, int]]) -> None:
    target.mkdir(parents=True, exist_ok=True)  # even for no skills: export → import works
    for path, (content, mode) in contents.items():
        destination = target.joinpath(*PurePosixPath(path).parts[1:])
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text(content, encoding="utf-8")
        destination.chmod(mode)


def _report_passed(passed: Passed) -> SkillReport:
    if passed.problem:
        return SkillReport(passed.name, problems=(passed.reason,))
    return SkillReport(passed.name, skipped=(("", passed.reason),))


async def _import_one(
    store: FileStore, ns: Namespace, folder: Folder, origin: Origin
) -> SkillReport:
    name, files, skipped = folder.name, folder.files, list(folder.skipped)
    source = folder.source if folder.source != name else ""
    if SKILL_FILE not in files:
        reason = dict(skipped).get(SKILL_FILE, "missing")
        problem = f"{SKILL_FILE}: {reason}"
        return SkillReport(name, skipped=tuple(skipped), problems=(problem,), source=source)
    try:
        validate_skill(f"/{name}/{SKILL_FILE}", files[SKILL_FILE])
    except InvalidSkill as exc:
        return SkillReport(
            name, skipped=tuple(skipped), problems=tuple(exc.problems), source=source
        )
    written: list[str] = []
    unchanged: list[str] = []
    for relative in sorted(files, key=lambda r: (r == SKILL_FILE, r)):
        path = f"/{name}/{relative}"
        try:
            result = await store.write(ns, path, files[relative], origin, expected_version=None)
            await store.set_mode(ns, path, folder.modes.get(relative, 0o644))
        except StoreError as exc:
            if relative == SKILL_FILE:
                return SkillReport(name, tuple(written), (), tuple(skipped), (str(exc),), source)
            skipped.append((relative, str(exc)))
            continue
        (unchanged if result.unchanged else written).append(path)
    return SkillReport(name, tuple(written), tuple(unchanged), tuple(skipped), source=source)
