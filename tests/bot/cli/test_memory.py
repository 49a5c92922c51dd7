"""``warroom memory ls|rm``: people list and prune the org's /memory from the shell."""

from __future__ import annotations

import asyncio
import doctest
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import memory
from bot.cli.app import app
from memory_store import Database, FileNotFound, FileStore, Namespace, Origin, Scope
from tests.bot.cli_support import warroom_env

ORG = "T0MEM"
MEMORY = Namespace(ORG, Scope.MEMORY)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A clean configuration with data under tmp_path and two memory files."""
    for name in warroom_env(tmp_path).keys() ^ os.environ.keys():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WARROOM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    asyncio.run(with_store(tmp_path, seed))
    return tmp_path


async def seed(store: FileStore) -> None:
    await store.write(
        MEMORY, "/teams/payments.md", "Payments own checkout.\n", Origin("U1"), expected_version=0
    )
    await store.write(MEMORY, "/spam.md", "x" * 500, Origin("U1"), expected_version=0)


async def with_store(home: Path, work: object) -> None:
    db = Database.from_url(None, data_dir=home / "data")
    try:
        await db.migrate()
        await work(FileStore(db))  # type: ignore[operator]
    finally:
        await db.dispose()


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_ls_lists_memory_files_with_sizes_and_the_org_usage(home: Path) -> None:
    code, output = invoke("memory", "ls", "--org", ORG)

    assert code == 0
    lines = output.splitlines()
    assert lines[0] == f"org {ORG}:"
    assert lines[1].split()[0] == "500"
    assert lines[1].endswith("  /memory/spam.md")
    assert lines[2].endswith("  /memory/teams/payments.md")
    assert "2 file(s), 523 bytes here" in output
    assert "the org's quota counts 2 file(s), 523 bytes" in output
    assert "its kept history (every version, of every scope) holds 523 bytes" in output


def test_ls_of_a_directory_outside_memory_says_so_without_a_traceback(home: Path) -> None:
    code, output = invoke("memory", "ls", "/skills", "--org", ORG)

    assert code == 2
    assert "/skills is not under /memory" in output
    assert "Traceback" not in output


def test_rm_deletes_files_and_reports_each(home: Path) -> None:
    code, output = invoke("memory", "rm", "/memory/spam.md", "/memory/nope.md", "--org", ORG)

    assert code == 1
    assert "  /memory/spam.md: deleted" in output
    assert "  /memory/nope.md: not deleted: " in output

    async def gone(store: FileStore) -> None:
        with pytest.raises(FileNotFound):
            await store.read(MEMORY, "/spam.md")
        assert await store.usage(ORG) == (1, 23)

    asyncio.run(with_store(home, gone))


def test_rm_refuses_a_path_outside_memory(home: Path) -> None:
    code, output = invoke("memory", "rm", "/incident/x.md", "--org", ORG)

    assert code == 1
    assert "/incident/x.md is not under /memory" in output


def test_memory_doctests_hold() -> None:
    result = doctest.testmod(memory)

    assert (result.failed, result.attempted > 0) == (0, True)
