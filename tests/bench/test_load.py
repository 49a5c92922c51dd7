"""``bench/load.py``'s fake model script, on the first messages the harness really builds.

Each answer indexes its incident's summary (issue #29) and every mention of a bench round
reads alike, so a session that starts after another answered finds that one as a related
past incident: its first message quotes the other's ``[session:bN]`` marker before its
own. The script must still answer the session that asked (else its answer names another
session, and the bench counts it lost while it was posted at once).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI
from harness import Inbound, Recall, SandboxWorkspaces
from memory_store import Database, FileStore, RecallStore
from sandbox_client import LocalConfig, LocalProvider, SandboxManager
from tests.harness.step_support import Kit

BENCH = Path(__file__).resolve().parents[2] / "bench" / "load.py"


@pytest.fixture(scope="module")
def load() -> ModuleType:
    """``bench/load.py`` as a module (the bench is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_load", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
async def kit(tmp_path: Path) -> AsyncIterator[tuple[Kit, Database]]:
    db = Database.from_url(None, data_dir=tmp_path)
    await db.migrate()
    manager = SandboxManager(LocalProvider(LocalConfig(state_dir=tmp_path / "sbx")))
    shared = Kit(FileStore(db), SandboxWorkspaces(manager))  # no tool here needs a sandbox
    try:
        yield shared, db
    finally:
        await shared.aclose()
        await manager.aclose()
        await db.dispose()


async def test_a_session_quoting_an_earlier_ones_marker_is_answered_as_itself(
    load: ModuleType, kit: tuple[Kit, Database]
) -> None:
    store, db = kit
    script = load.Script()
    recall = Recall(RecallStore(db))
    async with FakeAnthropicAPI(script) as fake:
        runs = []
        for n in range(2):  # b0 answers before b1's first step, as on a quiet host
            run = store.session(fake.base_url, session_id=f"s-b{n}")
            run.cp = replace(run.cp, channel_id=load.channel_of(f"b{n}"))
            run.recall = recall
            text = load.mention(n, run.cp.channel_id, "1.0")["event"]["text"]
            await run.run((Inbound("U0FAKEALICE", text, "Alice"),))
            runs.append(run)
        second_first = json.dumps(fake.requests[load.TODO_STEPS + 1].messages[0])

    # Given b1's first message quotes b0 (its related past incident) before its own text
    assert second_first.index("[session:b0]") < second_first.index("[session:b1]")
    # Then each session was scripted as itself: its own answer, after its own todo steps
    assert [run.answers for run in runs] == [
        [f"Load answer for b{n}: the pool is exhausted."] for n in range(2)
    ]
    assert {s: len(times) for s, times in script.times.items()} == {
        "b0": load.TODO_STEPS + 1,
        "b1": load.TODO_STEPS + 1,
    }
