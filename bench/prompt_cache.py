"""How well a session's prompts keep the prompt cache warm while others change memory.

A scripted 30-request session runs through ``harness.advance`` against the strict fake
Messages API (a current model that thinks by default; the real API's ~20-block cache
look-back and its minimum cacheable length): each of the first 29 replies makes three
parallel tool calls (Read, Edit, Bash, Grep and Write on the virtual mounts and in a
real local sandbox, plus a Read and a Grep); between steps another session edits
memory files the first one read and adds new notes. Prints one JSON line:

    cache_hit_fraction      of the prompt tokens of requests 3..30, the share read from the
                            cache (the fake's model: 4 bytes a token); goal ≥ 0.9
    prefix_stable_fraction  share of consecutive requests (n, n+1) where n+1 has the same
                            tools and system bytes and its messages start with n's
                            messages (canonical JSON, cache_control removed); goal ≥ 0.95
    requests                model requests sent
    parallel_calls          tool calls per reply (all but the last)
    cache_read_tokens       prompt tokens read from the cache, over the session
    cache_write_tokens      prompt tokens written to the cache, over the session
    uncached_tokens         prompt tokens neither read nor written

    .venv/bin/python bench/prompt_cache.py
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from goals import verdict  # bench/ is on the path when run as a script

from harness import Inbound, ModelResponded, SandboxWorkspaces
from memory_store import FileStore, Namespace, Origin, Scope
from sandbox_client import LocalConfig, LocalProvider, SandboxManager
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply, ToolCall
from tests.harness.step_support import CHANNEL, ORG, open_kit, prefix_stable

GOALS = {"cache_hit_fraction": (">=", 0.9), "prefix_stable_fraction": (">=", 0.95)}

MEMORY = Namespace(ORG, Scope.MEMORY)
INCIDENT = Namespace(ORG, Scope.INCIDENT, CHANNEL)
OTHER = Origin("U-BOB", "s-other", None)
RUNBOOKS = {
    f"/svc-{i}.md": f"# Service {i} runbook\nowner: team-{i}\npool: 20\nrestart: rollout\n"
    for i in range(4)
}


PARALLEL = 3


def _call(name: str, **tool_input: Any) -> ToolCall:
    return ToolCall(name, tool_input)


def script() -> list[Reply]:
    """29 replies of three parallel tool calls each, then the answer: 30 requests."""
    calls = [_call("Read", file_path=f"/memory{path}") for path in RUNBOOKS]
    calls += [
        _call("Write", file_path="/incident/findings.md", content="# Findings\n"),
        _call("Bash", command="printf 'pod-1 OOMKilled\\npod-2 Running\\n' > pods.txt"),
        _call("Grep", pattern="pool", path="/memory", output_mode="content"),
    ]
    for i in range(7):
        calls += [
            _call("Bash", command=f"grep -c OOM pods.txt; echo round {i}", description="Count"),
            _call("Grep", pattern="OOM", path="/workspace", output_mode="content"),
            _call(
                "Edit",
                file_path="/incident/findings.md",
                old_string="# Findings\n",
                new_string=f"# Findings\n- round {i}: pod-1 OOMKilled\n",
            ),
            _call("Read", file_path=f"/memory/svc-{i % 4}.md"),
        ]
    calls = calls[:29]
    replies = [
        Reply(
            (
                call,
                _call("Read", file_path=f"/memory/svc-{(i + 1) % 4}.md"),
                _call("Grep", pattern="owner", path="/memory", output_mode="content"),
            )
        )
        for i, call in enumerate(calls)
    ]
    return [*replies, Reply.text("pod-1 is OOMKilled; raise its memory limit.")]


async def other_session(store: FileStore, step: int) -> None:
    """Every 6th step another session edits a runbook; every 15th it adds a note."""
    if step % 6 == 5:
        path = f"/svc-{(step // 6) % 4}.md"
        current = await store.read(MEMORY, path)
        updated = current.content.replace("restart:", f"checked at step {step}\nrestart:")
        await store.write(MEMORY, path, updated, OTHER, expected_version=current.version)
    if step % 15 == 14:
        await store.write(
            INCIDENT, f"/note-{step}.md", f"Bob's note {step}\n", OTHER, expected_version=0
        )


async def main() -> None:
    data = Path(tempfile.mkdtemp(prefix="wr-bench-"))
    provider = LocalProvider(LocalConfig(state_dir=data / "sbx", network="none"))
    manager = SandboxManager(provider)
    try:
        async with (
            FakeAnthropicAPI(script()) as fake,
            open_kit(data, SandboxWorkspaces(manager)) as kit,
        ):
            for path, content in RUNBOOKS.items():
                await kit.store.write(MEMORY, path, content, OTHER, expected_version=0)
            run = kit.session(fake.base_url, session_id="s-bench")

            async def between(step: int) -> None:
                await other_session(kit.store, step)

            await run.run((Inbound("U-ALICE", "pods are crashing", "Alice"),), between=between)
            requests = fake.requests
            pairs = list(itertools.pairwise(requests))
            stable = sum(prefix_stable(a, b) for a, b in pairs)
            usage = run.cp.usage
            later = [e.usage for e in run.of_kind(ModelResponded)][2:]
            read = sum(u.cache_read_input_tokens for u in later)
            prompt = sum(u.prompt_tokens() for u in later)
        figures = {
            "cache_hit_fraction": round(read / prompt, 4),
            "prefix_stable_fraction": round(stable / len(pairs), 4),
            "requests": len(requests),
            "parallel_calls": PARALLEL,
            "cache_read_tokens": usage.cache_read_input_tokens,
            "cache_write_tokens": usage.cache_creation_input_tokens,
            "uncached_tokens": usage.input_tokens,
            "refused_requests": len(fake.refusals),
        }
        print(json.dumps(figures | verdict(figures, GOALS)))
    finally:
        await manager.aclose()
        await provider.destroy_all()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
