"""The local provider's lifecycle on real jails: freeze, thaw, kill, restart, destroy."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox_client import (
    ClientOptions,
    Health,
    LocalProvider,
    ProcessStatus,
    ProvisionFailed,
    SandboxCannotStart,
    SandboxGone,
    SandboxHandle,
    SandboxTimeout,
    SandboxUnavailable,
)
from sandbox_client.providers.local import procfs
from sandbox_client.providers.local.freezer import detect
from tests.sandbox_client.conftest import local_config, wait_for

SHORT = ClientOptions(request_timeout_s=0.3, stream_idle_timeout_s=0.3, max_attempts=1)


def _jail_states(handle: SandboxHandle) -> set[str]:
    assert handle.pid is not None
    return {procfs.state(pid) or "gone" for pid in procfs.descendants(handle.pid)}


async def test_a_suspended_sandbox_answers_nothing_until_resumed(
    provider: LocalProvider, fresh: SandboxHandle
) -> None:
    # Given a frozen sandbox
    await provider.suspend(fresh)
    assert await provider.health(fresh) is Health.SUSPENDED
    # When a request arrives, it fails with a timeout instead of hanging
    short = LocalProvider(replace(provider.config, client=SHORT))
    async with short.connect(fresh) as client:
        with pytest.raises(SandboxTimeout):
            await client.exec("while-frozen", "echo hi", timeout_s=5)
    # Then after resuming, it answers at once and the command was not lost
    await provider.resume(fresh)
    assert await provider.health(fresh) is Health.READY
    async with provider.connect(fresh) as client:
        record = await client.exec("while-frozen", "echo hi", timeout_s=5)
    assert record.stdout == "hi\n"


async def test_a_silent_stream_is_dead_and_the_process_is_found_again_by_name(
    provider: LocalProvider, fresh: SandboxHandle
) -> None:
    short = LocalProvider(replace(provider.config, client=SHORT))
    command = "echo started; while [ ! -e /workspace/go ]; do sleep 0.01; done; echo finished"
    async with short.connect(fresh) as client:
        seen: list[str] = []
        # Given a command streaming its output
        task = asyncio.create_task(
            client.exec(
                "tool-use-7", command, timeout_s=30, on_output=lambda c: seen.append(c.text)
            )
        )
        await wait_for(lambda: seen, what="the first output")
        # When the sandbox freezes mid-stream, the client gives up instead of hanging
        await provider.suspend(fresh)
        with pytest.raises(SandboxUnavailable):
            await task
    # Then once thawed, the same name re-attaches to the real process
    await provider.resume(fresh)
    async with provider.connect(fresh) as client:
        await client.write_file("/workspace/go", b"")
        record = await client.exec("tool-use-7", command, timeout_s=30)
    assert record.stdout == "started\nfinished\n"


@pytest.mark.parametrize("kind", ["cgroup2", "cgroup1", "signal"])
async def test_every_freezer_stops_the_whole_jail_and_thaws_it(state_dir: Path, kind: str) -> None:
    if kind != "signal" and detect((kind,)).kind != kind:
        pytest.skip(f"no writable {kind} hierarchy here")
    provider = LocalProvider(local_config(state_dir, freezer=kind))
    handle = await provider.provision(f"freezer-{kind}")
    try:
        async with provider.connect(handle) as client:
            await client.exec("bg", "sleep 1000 & echo started", timeout_s=10)
            await provider.suspend(handle)
            assert handle.freezer == kind
            assert await provider.health(handle) is Health.SUSPENDED
            if kind == "signal":
                assert _jail_states(handle) == {"T"}
            await provider.resume(handle)
            assert "T" not in _jail_states(handle)
            record = await client.exec("after-thaw", "echo thawed", timeout_s=10)
            assert record.stdout == "thawed\n"
    finally:
        await provider.destroy(handle)


async def test_a_sandbox_killed_from_outside_mid_command_is_gone_not_hanging(
    provider: LocalProvider, fresh: SandboxHandle
) -> None:
    async with provider.connect(fresh) as client:
        task = asyncio.create_task(client.exec("doomed", "echo up; sleep 1000", timeout_s=60))
        await wait_for(lambda: client.get_process("doomed"), what="the command to start")
        assert fresh.pid is not None
        os.kill(fresh.pid, signal.SIGKILL)
        with pytest.raises(SandboxUnavailable):
            await task
        assert "doomed" in client.unfinished_names
    await wait_for(lambda: _gone(provider, fresh), what="health GONE")
    with pytest.raises(SandboxGone):
        await provider.resume(fresh)


async def _gone(provider: LocalProvider, handle: SandboxHandle) -> bool:
    return await provider.health(handle) is Health.GONE


async def test_destroy_ends_every_process_and_removes_the_sandbox_directory(
    provider: LocalProvider,
) -> None:
    handle = await provider.provision("to-destroy")
    async with provider.connect(handle) as client:
        await client.exec("tree", "for i in 1 2; do sleep 1000 & done; echo ok", timeout_s=10)
    assert handle.pid is not None
    assert handle.state_dir is not None
    members = procfs.descendants(handle.pid)
    assert len(members) >= 4

    await provider.destroy(handle)

    assert not any(procfs.is_alive(pid, None) for pid in members)
    assert not _exists(handle.state_dir)
    assert not _exists(handle.cgroup)
    assert await provider.health(handle) is Health.GONE
    await provider.destroy(handle)  # idempotent


def _exists(path: str | None) -> bool:
    return path is not None and Path(path).exists()


async def test_another_process_with_the_stored_handle_reaches_the_same_sandbox(
    provider: LocalProvider, fresh: SandboxHandle
) -> None:
    stored = fresh.to_json()
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from sandbox_client import LocalConfig, LocalProvider, SandboxHandle\n"
        "async def main():\n"
        "    handle = SandboxHandle.from_json(sys.argv[1])\n"
        "    provider = LocalProvider(LocalConfig(state_dir=Path(sys.argv[2])))\n"
        "    assert provider.find(handle.sandbox_id) == handle\n"
        "    print(await provider.health(handle))\n"
        "    async with provider.connect(handle) as client:\n"
        "        record = await client.exec('from-elsewhere', 'echo hello', timeout_s=10)\n"
        "    print(record.stdout, end='')\n"
        "asyncio.run(main())\n"
    )
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", script, stored, str(provider.config.state_dir)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stdout == "READY\nhello\n"
    async with provider.connect(SandboxHandle.from_json(stored)) as client:
        record = await client.get_process("from-elsewhere")
    assert record is not None
    assert record.status is ProcessStatus.COMPLETED


async def test_provisioning_a_live_id_again_returns_the_same_sandbox(
    provider: LocalProvider, fresh: SandboxHandle
) -> None:
    again = await provider.provision(fresh.sandbox_id)

    assert again == fresh


async def test_destroy_all_ends_every_sandbox_of_a_state_directory(state_dir: Path) -> None:
    provider = LocalProvider(local_config(state_dir / "destroy-all"))
    handles = [await provider.provision(f"all-{n}") for n in range(2)]

    destroyed = await provider.destroy_all()

    assert sorted(destroyed) == ["all-0", "all-1"]
    assert [await provider.health(h) for h in handles] == [Health.GONE, Health.GONE]


async def test_a_bad_id_or_a_missing_interpreter_is_a_clear_provisioning_error(
    state_dir: Path,
) -> None:
    provider = LocalProvider(local_config(state_dir, python="/nonexistent/python3"))

    with pytest.raises(SandboxCannotStart, match="ids are"):
        await provider.provision("../escape")
    with pytest.raises(SandboxCannotStart) as caught:
        await provider.provision("no-python")
    assert "nonexistent" in caught.value.reason
    assert not (state_dir / "no-python").exists()


def _bwrap_script(path: Path, body: str) -> str:
    """An executable ``bwrap`` stand-in at ``path`` running ``body`` (sh)."""
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


async def test_a_bubblewrap_that_refuses_cannot_start_a_jail_and_says_why(
    state_dir: Path, tmp_path: Path
) -> None:
    refusing = "echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1"
    bwrap = _bwrap_script(tmp_path / "bwrap", refusing)
    provider = LocalProvider(local_config(state_dir / "refused", bwrap=bwrap))

    with pytest.raises(SandboxCannotStart) as caught:
        await provider.provision("refused")

    assert "bwrap: setting up uid map: Permission denied" in caught.value.reason
    assert not (state_dir / "refused" / "refused").exists()


async def test_bubblewrap_is_found_on_path_as_the_start_up_check_finds_it(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the jail is started with an empty environment: it must run the bwrap PATH names
    _bwrap_script(tmp_path / "bwrap", "echo 'the one on PATH' >&2; exit 1")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    provider = LocalProvider(local_config(state_dir / "on-path"))

    with pytest.raises(SandboxCannotStart, match="the one on PATH"):
        await provider.provision("on-path")


async def test_a_state_directory_that_cannot_be_written_cannot_start_a_jail(
    tmp_path: Path,
) -> None:
    (tmp_path / "sbx").write_text("a file where the directory should be\n")
    provider = LocalProvider(local_config(tmp_path / "sbx"))

    with pytest.raises(SandboxCannotStart, match="state directory"):
        await provider.provision("unwritable")


async def test_a_jail_only_slow_to_start_may_start_next_time(
    state_dir: Path, tmp_path: Path
) -> None:
    slow = _bwrap_script(tmp_path / "bwrap", "exec sleep 1")
    provider = LocalProvider(local_config(state_dir / "slow", bwrap=slow, start_timeout_s=0.2))

    with pytest.raises(ProvisionFailed) as caught:
        await provider.provision("slow")

    assert not isinstance(caught.value, SandboxCannotStart)
    assert "not ready within" in caught.value.reason
