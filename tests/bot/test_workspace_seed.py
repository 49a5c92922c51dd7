"""``WARROOM_WORKSPACE_SEED``: a directory whose files every new sandbox gets in ``/workspace``.

The runtime reads the directory once into set-up steps; the sandbox manager replays
them on each new sandbox, a replacement included.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.cli.terminal import TerminalReporter
from bot.durable.wiring import Runtime, workspace_seed
from bot.settings import Settings
from sandbox_client import LocalConfig, LocalProvider, SandboxManager, SetupStep


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    """A seed: a log under a subdirectory, a config at the top, a symbolic link."""
    (tmp_path / "seed" / "logs").mkdir(parents=True)
    (tmp_path / "seed" / "logs" / "app.log").write_text("14:02 ERROR 500\n")
    (tmp_path / "seed" / "db.yaml").write_text("pool_size: 5\n")
    (tmp_path / "seed" / "link").symlink_to(tmp_path / "seed" / "db.yaml")
    return tmp_path / "seed"


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A short directory for sandboxes (socket paths are at most 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="wr-seed-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_seed_directory_becomes_files_at_the_same_paths_under_workspace(seed: Path) -> None:
    steps = workspace_seed(seed)

    assert steps == (
        SetupStep.file("/workspace/db.yaml", b"pool_size: 5\n"),
        SetupStep.file("/workspace/logs/app.log", b"14:02 ERROR 500\n"),
    )


def test_no_seed_means_no_set_up() -> None:
    assert workspace_seed(None) == ()


def test_a_seed_that_is_not_a_directory_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WARROOM_WORKSPACE_SEED", str(tmp_path / "missing"))

    with pytest.raises(ValidationError, match="WARROOM_WORKSPACE_SEED"):
        Settings(_env_file=None)  # type: ignore[call-arg]


async def test_the_runtime_gives_every_new_sandbox_the_seed(seed: Path, tmp_path: Path) -> None:
    settings = Settings.model_construct(
        data_dir=tmp_path / "data", workspace_seed=seed, anthropic_api_key="unused"
    )

    async def enqueue(session_id: str, token: str) -> None:
        raise AssertionError("nothing is enqueued here")

    runtime = await Runtime.open(
        settings, enqueue=enqueue, reporter=TerminalReporter(io.StringIO())
    )
    try:
        assert runtime.driver.workspaces.setup == workspace_seed(seed)  # type: ignore[attr-defined]
    finally:
        await runtime.close()


async def test_a_replacement_sandbox_holds_the_seeded_files_again(
    seed: Path, state_dir: Path
) -> None:
    provider = LocalProvider(LocalConfig(state_dir=state_dir))
    manager = SandboxManager(provider)
    try:
        # Given a sandbox made with the seed
        first = await manager.ensure(None, workspace_seed(seed))
        assert await first.client.read_file("/workspace/logs/app.log") == b"14:02 ERROR 500\n"
        # When it is destroyed from outside
        await provider.destroy(first.handle)
        # Then its replacement has the seeded files too
        second = await manager.ensure(first.handle, workspace_seed(seed))
        assert second.replaced
        assert await second.client.read_file("/workspace/db.yaml") == b"pool_size: 5\n"
    finally:
        await manager.aclose()
        await provider.destroy_all()
