"""Replay the Claude Code scenario through Warroom's tools (the conformance kit's replay).

Each step's call goes through ``harness.run_tool`` (``SessionDriver``) with the fixture at
``/workspace`` in a real local sandbox (mode ``sandbox``) or seeded into the store at
``/incident`` (mode ``virtual``; the two Bash steps that append to ``stale.txt`` are then
replayed as another session's Edit, which is what "someone else changed it" means on the
shared trees). The skill is seeded at ``/skills/restart-pods/SKILL.md`` in both.
``$BGID``/``$BGFILE`` in a step are filled from Warroom's own earlier results.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import re
import shutil
import tarfile
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from harness import Checkpoint, Requester, ToolContext
from harness.sandbox.session import SandboxWorkspaces
from memory_store import (
    BackgroundTasks,
    Database,
    FileStore,
    Namespace,
    Origin,
    SandboxLedgerStore,
    Scope,
)
from sandbox_client import LocalConfig, LocalProvider, SandboxHandle, SandboxManager
from tests.harness.tool_support import SessionDriver
from tests.harness.tools.conformance.fixture import SKILL_PATH, make_fixture

HERE = Path(__file__).parent
ORG, SESSION, CHANNEL = "T-FID", "s-fid", "C-INCIDENT"
ROOTS = {"sandbox": "/workspace", "virtual": "/incident"}


@dataclasses.dataclass(frozen=True)
class Step:
    """One replayed call: its label, tool name, input as sent, and Warroom's result
    (the mode's root written ``$W``)."""

    label: str
    name: str
    result: str
    is_error: bool


class _NoSpawn:
    """An AgentSpawner that is never reached (the scenario only probes Agent's refusals)."""

    async def spawn(self, **kw: Any) -> str:
        raise AssertionError("the replay starts no subagents")


class _Driver(SessionDriver):
    def context(self, tool_use_id: str | None = None) -> ToolContext:
        return dataclasses.replace(super().context(tool_use_id), agents=_NoSpawn())


def scenario() -> list[tuple[str, str, dict[str, Any]]]:
    """(label, tool name, input with ``$W`` for the fixture) of each step."""
    calls = json.loads((HERE / "scenario.json").read_text())
    labels = json.loads((HERE / "scenario.labels.json").read_text())
    return [(label, c[0]["name"], c[0]["input"]) for label, c in zip(labels, calls, strict=True)]


def _tarball(root: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(root.iterdir()):
            tar.add(path, arcname=path.name)
    return buf.getvalue()


@contextlib.asynccontextmanager
async def _sandbox(db: Database, fixture: Path) -> AsyncIterator[Any]:
    state = Path(tempfile.mkdtemp(prefix="wr-cc-"))  # Unix socket paths stay short
    provider = LocalProvider(LocalConfig(state_dir=state, network="none"))
    manager = SandboxManager(provider, ledger=SandboxLedgerStore(db), idle_suspend_s=0.0)
    workspace = SandboxWorkspaces(manager).open(
        Checkpoint(SESSION, ORG, CHANNEL, Requester("U-REQ"))
    )
    try:
        await workspace.write_file("/workspace/.seed.tgz", _tarball(fixture))
        untar = "tar xzf /workspace/.seed.tgz -C /workspace && rm /workspace/.seed.tgz"
        assert (await workspace.exec("seed", untar, timeout_s=60)).exit_code == 0
        yield workspace
    finally:
        handle = workspace.handle_json()
        await manager.aclose()
        if handle is not None:
            with contextlib.suppress(Exception):
                await provider.destroy(SandboxHandle.from_json(handle))
        await provider.aclose()
        shutil.rmtree(state, ignore_errors=True)


def _fill(value: Any, seen: str) -> Any:
    """``$BGID``/``$BGFILE``: the latest background task id and output file seen so far."""
    ids = re.findall(r"ID: (\w+)", seen)
    files = re.findall(r"Output is being written to: (\S+?\.output)", seen)
    text = json.dumps(value).replace("$BGID", ids[-1] if ids else "none")
    return json.loads(text.replace("$BGFILE", files[-1] if files else "/none"))


def _seed_texts(fixture: Path) -> list[tuple[str, str]]:
    """(path under the mount, text) of the fixture's files the store can hold, oldest
    first, so the store's own times keep the fixture's order."""
    files = [p for p in fixture.rglob("*") if p.is_file() and ".claude" not in p.parts]
    texts = []
    for path in sorted(files, key=lambda p: (p.stat().st_mtime, str(p))):
        data = path.read_bytes()
        if b"\0" not in data and len(data) <= 200_000:  # text only, up to the size limit
            texts.append(("/" + str(path.relative_to(fixture)), data.decode()))
    return texts


async def _seed_virtual(store: FileStore, fixture: Path) -> None:
    ns = Namespace(ORG, Scope.INCIDENT, CHANNEL)
    for rel, text in await asyncio.to_thread(_seed_texts, fixture):
        origin = Origin("U-SEED", None, f"seed{rel}")
        await store.write(ns, rel, text, origin, expected_version=0)


async def replay(mode: str, work: Path) -> list[Step]:
    """Every step's result in ``mode`` (``sandbox`` or ``virtual``); ``work`` is scratch."""
    fixture = work / "fixture"
    await asyncio.to_thread(make_fixture, fixture)
    db = Database.from_url(None, data_dir=work, pool_size=2, max_overflow=2)
    await db.migrate()
    store, tasks = FileStore(db), BackgroundTasks(db)
    root = ROOTS[mode]
    try:
        async with _sandbox(db, fixture) as workspace:
            me = _Driver(store, workspace, org_id=ORG, channel_id=CHANNEL, session_id=SESSION)
            me.tasks = tasks
            other = SessionDriver(store, workspace, org_id=ORG, channel_id=CHANNEL)
            skill = (fixture / SKILL_PATH).read_text()
            seed = Origin("U-SEED", None, "seed")
            await store.write(
                Namespace(ORG, Scope.SKILLS),
                "/restart-pods/SKILL.md",
                skill,
                seed,
                expected_version=0,
            )
            if mode == "virtual":
                await _seed_virtual(store, fixture)
            steps, seen = [], ""
            for k, (label, name, raw) in enumerate(scenario()):
                tool_input = _fill(json.loads(json.dumps(raw).replace("$W", root)), seen)
                command = str(tool_input.get("command", ""))
                if mode == "virtual" and name == "Bash" and "stale.txt" in command:
                    content, is_error = await _other_edits(other, command)
                else:
                    outcome = await me.call(name, tool_input, tool_use_id=f"toolu_{k:02d}_0")
                    content, is_error = outcome.content, outcome.is_error
                seen += "\n" + content
                await me.next_step_notices()
                steps.append(Step(label, name, content.replace(root, "$W"), is_error))
            for task in await tasks.kill_all(SESSION):
                with contextlib.suppress(Exception):
                    await workspace.kill(task.tool_use_id)
    finally:
        await db.dispose()
    return steps


async def _other_edits(other: SessionDriver, command: str) -> tuple[str, bool]:
    """Another session appends the line ``command`` appends to ``/incident/stale.txt``."""
    current = (await other.call("Read", {"file_path": "/incident/stale.txt"})).content
    last = [line.split("\t", 1)[1] for line in current.split("\n") if "\t" in line][-1]
    line = "three" if "three" in command else "four"
    edit = {"file_path": "/incident/stale.txt", "old_string": last, "new_string": f"{last}\n{line}"}
    outcome = await other.call("Edit", edit)
    return f"[replayed as another session's Edit: {outcome.content[:120]}]", outcome.is_error
