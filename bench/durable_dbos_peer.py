"""The peer of ``bench/durable.py``: DBOS Transact's per-step overhead on the same PostgreSQL.

Run with a Python that has ``dbos`` installed (it is not one of Warroom's
dependencies; ``bench/durable.py --dbos-python PATH`` runs this file with it):

    python bench/durable_dbos_peer.py --database-url postgresql://… [--steps 200]

A workflow of ``--steps`` async steps, each returning a state of about the size of a
Warroom checkpoint's state (~1 KB: a todo list and counters), as a durable step
records it: DBOS writes each step's output to its system database before the next
step runs. Each step call is timed where the workflow awaits it (the step and its
record), after a warm-up workflow; CPU is this process's. Prints one JSON line:
``step_p50_ms`` (the median step of ``--rounds`` workflows, the peer of a Warroom step's
p50), ``step_mean_ms`` (wall time over steps), ``step_cpu_ms``.

With ``--model-url URL`` (a Messages API: ``bench/durable.py`` passes its fake, the one its
real workers call) it also runs the work a worker's session does, as a DBOS workflow:
``--turns`` model steps, each one streaming Messages API call through the ``anthropic``
SDK with the conversation so far (the answer is a ``TodoWrite`` call), each followed by a
tool step that returns its result, every step's output recorded by DBOS before the next.
``agent_model_step_p50_ms`` and ``agent_tool_step_p50_ms`` are the median step of each
kind (a model step from the end of the previous step to its answer recorded, the model's
own time included), ``agent_step_mean_ms`` the wall time per step (median over
``--rounds``): the peers of the real workers' figures. ``--agent-only`` skips the bare
steps (``bench/durable.py`` runs them and the agent loop in different rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import anthropic
from dbos import DBOS, DBOSConfig

TODOS = [{"content": "Check pods", "status": "in_progress", "activeForm": "Checking"}]
timings: dict[str, list[float]] = {"bare": [], "model": [], "tool": []}
"""Seconds per step call, by kind, as the workflows await them (measurement only)."""


@DBOS.step()
async def tool_step(n: int) -> dict[str, Any]:
    """One step: the state after a TodoWrite call (as a checkpoint's state holds it)."""
    return {
        "steps": n,
        "todos": [dict(t, content=f"{t['content']} {m}") for t in TODOS for m in range(8)],
    }


@DBOS.workflow()
async def session(steps: int) -> int:
    """A session of ``steps`` steps, each recorded before the next."""
    total = 0
    for n in range(steps):
        started = time.perf_counter()
        state = await tool_step(n)
        timings["bare"].append(time.perf_counter() - started)
        total += int(state["steps"])
    return total


TODO_WRITE = {
    "name": "TodoWrite",
    "description": "Update the todo list.",
    "input_schema": {"type": "object", "properties": {"todos": {"type": "array"}}},
}
_client: anthropic.AsyncAnthropic | None = None


@DBOS.step()
async def model_step(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One model call, streamed, as Warroom's adapter makes it; the assistant message."""
    assert _client is not None
    async with _client.messages.stream(
        model="claude-sonnet-5-5", max_tokens=1024, messages=messages, tools=[TODO_WRITE]
    ) as stream:
        reply = await stream.get_final_message()
    return {"role": "assistant", "content": [b.model_dump(mode="json") for b in reply.content]}


@DBOS.step()
async def result_step(call_id: str) -> dict[str, Any]:
    """One tool step: the TodoWrite call's result (the tool does no I/O)."""
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "Todos updated"}],
    }


@DBOS.workflow()
async def agent(turns: int) -> int:
    """``turns`` model steps, each followed by its tool step; returns the steps taken."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"[chain:{turns}] go"}]
    steps = 0
    while True:
        started = time.perf_counter()
        reply = await model_step(messages)
        timings["model"].append(time.perf_counter() - started)
        messages.append(reply)
        steps += 1
        calls = [b for b in reply["content"] if b["type"] == "tool_use"]
        if not calls:
            return steps
        started = time.perf_counter()
        messages.append(await result_step(calls[0]["id"]))
        timings["tool"].append(time.perf_counter() - started)
        steps += 1


async def agent_rounds(model_url: str, turns: int, count: int) -> list[float]:
    global _client
    _client = anthropic.AsyncAnthropic(api_key="sk-ant-bench", base_url=model_url)
    try:
        await agent(2)  # warm-up
        timings["model"].clear()
        timings["tool"].clear()
        walls = []
        for _ in range(count):
            wall = time.perf_counter()
            steps = await agent(turns)
            walls.append((time.perf_counter() - wall) / steps)
        return walls
    finally:
        await _client.close()


async def rounds(steps: int, count: int) -> tuple[list[float], list[float]]:
    await session(5)  # warm-up
    timings["bare"].clear()
    walls, cpus = [], []
    for _ in range(count):
        wall, cpu = time.perf_counter(), time.process_time()
        await session(steps)
        walls.append((time.perf_counter() - wall) / steps)
        cpus.append((time.process_time() - cpu) / steps)
    return walls, cpus


async def measure(args: argparse.Namespace) -> tuple[list[float], list[float], list[float]]:
    """The bare steps' wall and CPU times, then (with ``--model-url``) the agent loop's."""
    walls, cpus = ([], []) if args.agent_only else await rounds(args.steps, args.rounds)
    agent_walls: list[float] = []
    if args.model_url:
        agent_walls = await agent_rounds(args.model_url, args.turns, args.rounds)
    return walls, cpus, agent_walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model-url", default=None, help="a Messages API for the agent loop")
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--agent-only", action="store_true", help="skip the bare steps")
    args = parser.parse_args()
    config: DBOSConfig = {"name": "warroom-bench-peer", "system_database_url": args.database_url}
    DBOS(config=config)
    DBOS.launch()
    try:
        walls, cpus, agent_walls = asyncio.run(measure(args))
    finally:
        DBOS.destroy()
    figures: dict[str, Any] = {"steps": args.steps, "rounds": args.rounds}
    if walls:
        figures["step_p50_ms"] = _ms(statistics.median(timings["bare"]))
        figures["step_mean_ms"] = _ms(statistics.median(walls))
        figures["step_cpu_ms"] = _ms(statistics.median(cpus))
    if agent_walls:
        figures["agent_model_step_p50_ms"] = _ms(statistics.median(timings["model"]))
        figures["agent_tool_step_p50_ms"] = _ms(statistics.median(timings["tool"]))
        figures["agent_step_mean_ms"] = _ms(statistics.median(agent_walls))
        figures["agent_turns"] = args.turns
    print(json.dumps(figures))


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


if __name__ == "__main__":
    main()
