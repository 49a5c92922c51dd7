"""Claude Code skill folders go into an org's /skills and come back out unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.cli.skill_folders import ASSET
from bot.cli.skills_io import export_skills, import_skills
from memory_store import FileNotFound, FileStore, Namespace, Scope

ORG = "T0SKILLS"
SKILLS = Namespace(ORG, Scope.SKILLS)


def skill_md(
    name: str, description: str = "Restart crash-looping pods; use when pods flap."
) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nSteps.\n"


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    """Two valid Claude Code skill folders, one with extra files in a subfolder."""
    root = tmp_path / "skills"
    write(root / "restart-pods" / "SKILL.md", skill_md("restart-pods"))
    write(root / "restart-pods" / "scripts" / "restart.sh", "kubectl rollout restart deploy/$1\n")
    write(root / "restart-pods" / "reference.md", "Pods restart in ~30 s.\n")
    write(root / "db-pool" / "SKILL.md", skill_md("db-pool", "Check DB pool saturation."))
    return root


async def test_import_puts_every_file_of_every_skill_folder_under_skills(
    file_store: FileStore, skills_dir: Path
) -> None:
    reports = await import_skills(file_store, ORG, skills_dir)

    assert [(r.name, r.ok) for r in reports] == [("db-pool", True), ("restart-pods", True)]
    assert reports[1].written == (
        "/restart-pods/reference.md",
        "/restart-pods/scripts/restart.sh",
        "/restart-pods/SKILL.md",
    )
    stored = await file_store.read(SKILLS, "/restart-pods/scripts/restart.sh")
    assert stored.content == "kubectl rollout restart deploy/$1\n"
    assert stored.actor == "cli"
    assert (await file_store.read(SKILLS, "/db-pool/SKILL.md")).content == skill_md(
        "db-pool", "Check DB pool saturation."
    )


async def test_importing_the_same_folders_again_makes_no_new_versions(
    file_store: FileStore, skills_dir: Path
) -> None:
    await import_skills(file_store, ORG, skills_dir)

    again = await import_skills(file_store, ORG, skills_dir)

    assert all(r.written == () for r in again)
    assert len(again[1].unchanged) == 3
    assert (await file_store.read(SKILLS, "/restart-pods/SKILL.md")).version == 1


async def test_an_invalid_skill_is_reported_with_its_problems_and_not_imported(
    file_store: FileStore, skills_dir: Path
) -> None:
    # Given a folder whose SKILL.md frontmatter is never closed
    write(skills_dir / "broken" / "SKILL.md", "---\nname: broken\nbody\n")
    write(skills_dir / "broken" / "notes.md", "notes\n")

    reports = {r.name: r for r in await import_skills(file_store, ORG, skills_dir)}

    broken = reports["broken"]
    assert not broken.ok
    assert any("not closed" in p for p in broken.problems)
    with pytest.raises(FileNotFound):
        await file_store.read(SKILLS, "/broken/notes.md")
    assert reports["restart-pods"].ok


async def test_skills_claude_code_loads_are_imported(
    file_store: FileStore, skills_dir: Path
) -> None:
    # Given: no frontmatter; a name other than the folder's; a 1,068-character description
    write(skills_dir / "plain" / "SKILL.md", "# Plain\n\nDo the thing.\n")
    write(skills_dir / "renamed" / "SKILL.md", skill_md("Another Name"))
    write(skills_dir / "claude-api" / "SKILL.md", skill_md("claude-api", "d" * 1068))

    reports = {r.name: r for r in await import_skills(file_store, ORG, skills_dir)}

    assert all(reports[n].ok for n in ("plain", "renamed", "claude-api"))
    listed = {e.path for e in await file_store.index(SKILLS)}
    assert {"/plain/SKILL.md", "/renamed/SKILL.md", "/claude-api/SKILL.md"} <= listed


async def test_skills_in_a_category_folder_are_imported_under_their_own_names(
    file_store: FileStore, skills_dir: Path
) -> None:
    write(skills_dir / "document-skills" / "pdf" / "SKILL.md", skill_md("pdf"))
    write(skills_dir / "document-skills" / "README.md", "Document skills.\n")

    reports = {r.name: r for r in await import_skills(file_store, ORG, skills_dir)}

    assert reports["pdf"].ok
    assert reports["pdf"].source == "document-skills/pdf"
    assert (await file_store.read(SKILLS, "/pdf/SKILL.md")).version == 1


async def test_folders_not_imported_are_reported_with_the_reason(
    file_store: FileStore, skills_dir: Path
) -> None:
    write(skills_dir / "lower" / "skill.md", skill_md("lower"))
    write(skills_dir / "docs" / "intro.md", "Not a skill.\n")
    write(skills_dir / "team" / "db-pool" / "SKILL.md", skill_md("db-pool"))

    reports = await import_skills(file_store, ORG, skills_dir)

    said = {(r.name, r.ok): [*r.problems, *(why for _, why in r.skipped)] for r in reports}
    assert said[("lower", False)] == [
        "skill.md: Claude Code loads only SKILL.md (upper case); rename it"
    ]
    assert said[("docs", True)] == ["no SKILL.md in it or in its sub-folders: not a skill folder"]
    assert said[("db-pool", False)] == [
        "team/db-pool: db-pool has the same folder name; rename one to import both"
    ]


async def test_executable_bits_survive_import_and_export(
    file_store: FileStore, skills_dir: Path, tmp_path: Path
) -> None:
    script = skills_dir / "restart-pods" / "scripts" / "restart.sh"
    script.chmod(0o755)

    await import_skills(file_store, ORG, skills_dir)
    await export_skills(file_store, ORG, tmp_path / "out")

    exported = tmp_path / "out" / "restart-pods" / "scripts" / "restart.sh"
    assert exported.stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out" / "db-pool" / "SKILL.md").stat().st_mode & 0o111 == 0


async def test_binary_oversized_hidden_and_linked_files_are_skipped_with_a_reason(
    file_store: FileStore, skills_dir: Path
) -> None:
    folder = skills_dir / "restart-pods"
    write(folder / "diagram.png", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    write(folder / "nul.txt", "text\x00with a NUL")
    write(folder / "huge.log", "x" * 2000)
    write(folder / ".DS_Store", "junk")
    os.symlink("/etc/passwd", folder / "passwd")

    reports = await import_skills(file_store, ORG, skills_dir, max_file_bytes=1000)

    skipped = dict(reports[1].skipped)
    assert skipped["diagram.png"] == f"binary (not UTF-8 text): {ASSET}"
    assert skipped["nul.txt"] == f"binary (not UTF-8 text): {ASSET}"
    assert skipped["huge.log"] == f"2,000 bytes, over the 1,000-byte limit of a file: {ASSET}"
    assert skipped[".DS_Store"] == "hidden"
    assert skipped["passwd"] == (
        "a symbolic link out of the skill folder (to /etc/passwd): not followed"
    )
    assert "/restart-pods/reference.md" in reports[1].written
    with pytest.raises(FileNotFound):
        await file_store.read(SKILLS, "/restart-pods/passwd")


async def test_a_single_skill_folder_can_be_imported_by_itself(
    file_store: FileStore, skills_dir: Path
) -> None:
    reports = await import_skills(file_store, ORG, skills_dir / "db-pool")

    assert [r.name for r in reports] == ["db-pool"]
    assert (await file_store.read(SKILLS, "/db-pool/SKILL.md")).version == 1


async def test_import_refuses_a_path_that_is_not_a_directory(
    file_store: FileStore, tmp_path: Path
) -> None:
    with pytest.raises(NotADirectoryError, match=r"^not a directory: .*file\.md$"):
        await import_skills(file_store, ORG, write(tmp_path / "file.md", "x"))


async def test_import_of_a_missing_path_says_there_is_no_such_directory(
    file_store: FileStore, tmp_path: Path
) -> None:
    with pytest.raises(FileNotFoundError, match=r"^no such directory: .*nowhere$"):
        await import_skills(file_store, ORG, tmp_path / "nowhere")


async def test_export_of_an_org_without_skills_creates_the_empty_directory(
    file_store: FileStore, tmp_path: Path
) -> None:
    assert await export_skills(file_store, ORG, tmp_path / "out") == []

    assert (tmp_path / "out").is_dir()
    assert await import_skills(file_store, ORG, tmp_path / "out") == []


async def test_export_writes_the_folders_back_as_they_were_imported(
    file_store: FileStore, skills_dir: Path, tmp_path: Path
) -> None:
    # Given the folders imported into one org
    await import_skills(file_store, ORG, skills_dir)

    # When they are exported to an empty directory
    out = tmp_path / "out"
    reports = await export_skills(file_store, ORG, out)

    # Then the exported tree equals the source tree, file for file
    assert [r.name for r in reports] == ["db-pool", "restart-pods"]
    assert tree(out) == tree(skills_dir)


async def test_export_reads_only_the_given_org(
    file_store: FileStore, skills_dir: Path, tmp_path: Path
) -> None:
    await import_skills(file_store, "T0OTHER", skills_dir)

    assert await export_skills(file_store, ORG, tmp_path / "out") == []


def tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


async def test_hidden_folders_links_and_top_level_files_are_reported_not_passed_silently(
    file_store: FileStore, skills_dir: Path
) -> None:
    write(skills_dir / ".hidden" / "SKILL.md", skill_md("hidden"))
    (skills_dir / "gone").symlink_to(skills_dir / "nowhere", target_is_directory=True)
    write(skills_dir / "README.md", "# our skills\n")

    reports = await import_skills(file_store, ORG, skills_dir)

    said = {r.name: [*r.problems, *(why for _, why in r.skipped)] for r in reports}
    assert said[".hidden"] == ["hidden: not imported"]
    assert said["gone"] == [f"a broken symbolic link (to {skills_dir / 'nowhere'})"]
    assert said["README.md"] == ["a file, not a skill folder"]


async def test_a_skill_folder_that_is_a_symbolic_link_is_imported_as_claude_code_loads_it(
    file_store: FileStore, tmp_path: Path
) -> None:
    # Given skills a dotfile manager linked into place: a skill, a category, a file
    dotfiles = tmp_path / "dotfiles"
    write(dotfiles / "triage" / "SKILL.md", skill_md("triage"))
    write(dotfiles / "triage" / "checklist.md", "1. Look at the graphs.\n")
    write(dotfiles / "ops" / "rollback" / "SKILL.md", skill_md("rollback"))
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "triage").symlink_to(dotfiles / "triage", target_is_directory=True)
    (skills / "ops").symlink_to(dotfiles / "ops", target_is_directory=True)
    (dotfiles / "triage" / "latest.md").symlink_to("checklist.md")  # within the skill

    # When they are imported
    reports = await import_skills(file_store, ORG, skills)

    # Then each is imported, the link within the skill read as its target
    assert [(r.name, r.ok) for r in reports] == [("rollback", True), ("triage", True)]
    assert (await file_store.read(SKILLS, "/triage/latest.md")).content == (
        "1. Look at the graphs.\n"
    )
    assert (await file_store.read(SKILLS, "/rollback/SKILL.md")).content == skill_md("rollback")


def test_the_import_of_skills_with_binary_assets_succeeds_and_says_why_they_stay_out(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from bot.cli.app import app

    # Given a skill with a font and an archive, as Anthropic's public skills have
    skills = tmp_path / "skills"
    write(skills / "canvas" / "SKILL.md", skill_md("canvas"))
    write(skills / "canvas" / "fonts" / "Mono.ttf", b"\x00\x01\x00\x00\x00\x0f\x00\x80")
    write(skills / "canvas" / "kit.tar.gz", b"\x1f\x8b\x08\x00\xff\xfe")

    # When it is imported from the command line
    result = CliRunner().invoke(
        app, ["skills", "import", str(skills)], env={"WARROOM_DATA_DIR": str(tmp_path / "d")}
    )

    # Then the skill is in, the exit code 0, and the reason for the assets said once
    assert result.exit_code == 0, result.output
    assert "  ok       canvas: 1 file(s) imported" in result.output
    assert f"  skipped  canvas/fonts/Mono.ttf: binary (not UTF-8 text): {ASSET}" in result.output
    assert result.output.count("WARROOM_WORKSPACE_SEED") == 1


def test_a_yaml_error_in_a_skills_frontmatter_is_one_line_saying_where(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from bot.cli.app import app

    skills = tmp_path / "skills"
    write(skills / "triage" / "SKILL.md", "---\nname: triage\ndescription: [unclosed\n---\n")

    result = CliRunner().invoke(
        app, ["skills", "import", str(skills)], env={"WARROOM_DATA_DIR": str(tmp_path / "d")}
    )

    assert result.exit_code == 1
    (problem,) = [line for line in result.output.splitlines() if "not valid YAML" in line]
    assert "line 3, column 23 of the file: expected ',' or ']', but got '<stream end>'" in problem
    assert "^" not in result.output  # no excerpt of the file


async def test_link_loops_are_reported_not_followed_and_nothing_outside_is_read(
    file_store: FileStore, skills_dir: Path
) -> None:
    # Given a link back to the skills folder, a link to itself and one to /etc in a skill
    (skills_dir / "loop").symlink_to(skills_dir, target_is_directory=True)
    (skills_dir / "db-pool" / "self").symlink_to("self")
    (skills_dir / "db-pool" / "etc").symlink_to("/etc", target_is_directory=True)

    reports = await import_skills(file_store, ORG, skills_dir)

    # Then each skill is imported once, and each link says why it was passed over
    said = {r.name: (r.ok, dict(r.skipped)) for r in reports}
    assert said["loop"] == (
        True,
        {"": "a symbolic link to this folder or one above it: not followed"},
    )
    assert said["db-pool"][1] == {
        "etc": "a symbolic link out of the skill folder (to /etc): not followed",
        "self": "a broken symbolic link (to self)",
    }
    assert all(ok for ok, _ in said.values())
