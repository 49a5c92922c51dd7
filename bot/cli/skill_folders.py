"""Finding and reading Claude Code skill folders on disk, for ``warroom skills import``.

A source is one skill folder (it holds ``SKILL.md``) or a directory of them. A folder
of skill folders one level down (a category, such as ``document-skills/pdf``) is
looked into: its skills are imported under their own folder names. Every folder that
is not imported is reported with the reason: a ``skill.md`` in the wrong letter case
(Claude Code loads only ``SKILL.md``), two skills with one name, or no ``SKILL.md``
at all. Hidden directories (``.git``) are passed over. A skill or category folder that
is a symbolic link (as dotfile managers such as GNU Stow make them) is followed, as
Claude Code follows it; a broken link is reported. Within a skill folder, a link to a
file of the same skill is read; files that are binary, over the store's size cap,
links leading out of the skill, or hidden are skipped with a reason; each file's
permission bits are read (scripts stay executable).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SKILL_FILE = "SKILL.md"
ASSET = "kept out of /skills (see the note below)"
"""The end of the reason an asset is skipped for: ``ASSETS_NOTE`` says why, once."""
BINARY = f"binary (not UTF-8 text): {ASSET}"
ASSETS_NOTE = (
    "note: /skills holds text the model reads, and a script cannot run from it (the "
    "sandbox does not see it), so binary and oversized files are not imported; put the "
    "files a skill's scripts need (fonts, archives, large schemas) in a directory named by "
    "WARROOM_WORKSPACE_SEED: every sandbox gets them in /workspace."
)


@dataclass(frozen=True)
class Folder:
    """A skill folder read from disk.

    Attributes:
        name: the skill's name (its folder's name).
        source: where it was, relative to the import source ("ops/pdf"); "" for itself.
        files: text files by relative POSIX path; ``modes``: their permission bits.
        skipped: (relative path, reason) for the files left out.
    """

    name: str
    source: str
    files: dict[str, str] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Passed:
    """A folder that is not imported: ``reason``, and whether it is a ``problem`` to fix
    (a skill that cannot be imported) or just not a skill."""

    name: str
    reason: str
    problem: bool


def find(source: Path, max_file_bytes: int) -> tuple[list[Folder], list[Passed]]:
    """The skill folders under ``source`` (read), and the folders passed over.

    Raises:
        FileNotFoundError: ``source`` does not exist ("no such directory: …").
        NotADirectoryError: ``source`` is not a directory ("not a directory: …").
    """
    if not source.exists():
        raise FileNotFoundError(f"no such directory: {source}")
    if not source.is_dir():
        raise NotADirectoryError(f"not a directory: {source}")
    if (source / SKILL_FILE).is_file():
        return [read(source, source.name, "", max_file_bytes)], []
    found: dict[str, Folder] = {}
    passed: list[Passed] = _passed_over(source)
    top = source.resolve()
    for child in _subdirectories(source):
        if child.is_symlink() and top.is_relative_to(child.resolve()):
            reason = "a symbolic link to this folder or one above it: not followed"
            passed.append(Passed(child.name, reason, problem=False))
            continue
        for path, where in _skills_in(child, passed):
            if path.name in found:
                other = found[path.name].source
                reason = f"{where}: {other} has the same folder name; rename one to import both"
                passed.append(Passed(path.name, reason, problem=True))
                continue
            found[path.name] = read(path, path.name, where, max_file_bytes)
    return sorted(found.values(), key=lambda f: f.name), passed


def _skills_in(child: Path, passed: list[Passed]) -> list[tuple[Path, str]]:
    """Skill folders at ``child`` or one level below (a category); the rest reported."""
    if (problem := _misnamed(child)) is not None:
        passed.append(Passed(child.name, problem, problem=True))
        return []
    if (child / SKILL_FILE).is_file():
        return [(child, child.name)]
    nested: list[tuple[Path, str]] = []
    for grandchild in _subdirectories(child):
        where = f"{child.name}/{grandchild.name}"
        if (problem := _misnamed(grandchild)) is not None:
            passed.append(Passed(grandchild.name, f"{where}: {problem}", problem=True))
        elif (grandchild / SKILL_FILE).is_file():
            nested.append((grandchild, where))
    if not nested:
        reason = f"no {SKILL_FILE} in it or in its sub-folders: not a skill folder"
        passed.append(Passed(child.name, reason, problem=False))
    return nested


def _misnamed(folder: Path) -> str | None:
    if (folder / SKILL_FILE).is_file():
        return None
    for entry in folder.iterdir():
        if entry.name.casefold() == SKILL_FILE.casefold() and entry.is_file():
            return f"{entry.name}: Claude Code loads only {SKILL_FILE} (upper case); rename it"
    return None


def _passed_over(folder: Path) -> list[Passed]:
    """What ``find`` does not look into at the top of ``folder``, each with the reason:
    hidden entries, links, and plain files (a skill is a folder)."""
    passed = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            passed.append(Passed(entry.name, "hidden: not imported", problem=False))
        elif entry.is_symlink() and not entry.exists():
            reason = f"a broken symbolic link (to {os.readlink(entry)})"
            passed.append(Passed(entry.name, reason, problem=True))
        elif not entry.is_dir():
            passed.append(Passed(entry.name, "a file, not a skill folder", problem=False))
    return passed


def _subdirectories(folder: Path) -> list[Path]:
    """The folders in ``folder``, links to folders included (followed); hidden ones not."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and p.name[0] != ".")


def read(folder: Path, name: str, source: str, max_file_bytes: int) -> Folder:
    """The text files of one skill folder, their modes, and the skipped files."""
    result = Folder(name, source)
    root = folder.resolve()
    for path in _walk(folder):
        relative = path.relative_to(folder).as_posix()
        reason = _skip_reason(path, root, max_file_bytes)
        text = None
        if reason is None:
            try:
                text = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                reason = BINARY
        if text is not None and "\x00" in text:
            reason = BINARY
        if reason is not None or text is None:
            result.skipped.append((relative, reason or "unreadable"))
            continue
        result.files[relative] = text
        result.modes[relative] = path.stat().st_mode & 0o777
    return result


def _walk(folder: Path) -> Iterator[Path]:
    """Every entry under ``folder``, depth first by name; hidden or linked directories are
    yielded (to be skipped), not entered."""
    for path in sorted(folder.iterdir()):
        if path.is_dir() and not path.is_symlink() and not path.name.startswith("."):
            yield from _walk(path)
        else:
            yield path


def _skip_reason(path: Path, root: Path, max_file_bytes: int) -> str | None:
    if path.name.startswith("."):
        return "hidden"
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):  # missing, or a loop (RuntimeError before 3.13)
            return f"a broken symbolic link (to {os.readlink(path)})"
        if not target.is_relative_to(root):
            return f"a symbolic link out of the skill folder (to {os.readlink(path)}): not followed"
    if path.is_symlink() and path.is_dir():
        return "a symbolic link to a folder: not followed"
    if not path.is_file():
        return "not a regular file"
    size = path.stat().st_size
    if size > max_file_bytes:
        return f"{size:,} bytes, over the {max_file_bytes:,}-byte limit of a file: {ASSET}"
    return None
