"""Benchmark of the model adapter against the local fake Messages API.

Prints one JSON line:
    build_request_us      mean time to serialise a 40-message request (tools, system, breakpoints)
    request_kib           size of that request body
    prefix_reuse          share of request n+1's bytes that repeat request n (growing session)
    complete_ms_p50/p95   end-to-end ``complete`` latency for a ~1 KiB streamed text reply
    tool_call_ms_p50      same, for a tool_use reply with its input in partial JSON chunks
    retry_overhead_ms     extra latency of one 529 + retry (backoff sleep excluded)

No goal is set for these figures yet: ``goal`` is empty, ``met`` null (``bench/goals.py``).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from goals import verdict  # bench/ is on the path when run as a script

from harness import (
    DEFAULT_MODEL,
    AnthropicModel,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    build_request,
)
from tests.fakes.anthropic_api import FakeAnthropicAPI, Fault, Reply

TOOLS = tuple(
    ToolSpec(name, f"The {name} tool. " * 20, {"type": "object", "properties": {"x": {}}})
    for name in ("Read", "Write", "Edit", "Glob", "Grep", "Bash", "TodoWrite")
)
SYSTEM = "You are Warroom. " * 200
ROUNDS = 40


def transcript(turns: int) -> tuple[Message, ...]:
    messages = [Message("user", (TextBlock("index " * 300), TextBlock("the incident")))]
    for i in range(turns):
        call = ToolUseBlock(f"toolu_{i}", "Bash", {"command": f"kubectl logs pod-{i}"})
        messages.append(Message("assistant", (TextBlock("Looking."), call)))
        messages.append(Message("user", (ToolResultBlock(f"toolu_{i}", "log line\n" * 50),)))
    return tuple(messages)


def bench_build() -> tuple[float, float, float]:
    messages = transcript(20)
    runs = 300
    start = time.perf_counter()
    for _ in range(runs):
        body = build_request(
            model=DEFAULT_MODEL, max_tokens=8192, system=SYSTEM, tools=TOOLS, messages=messages
        )
    build_us = (time.perf_counter() - start) / runs * 1e6
    before = build_request(
        model=DEFAULT_MODEL, max_tokens=8192, system=SYSTEM, tools=TOOLS, messages=transcript(19)
    )
    mark = before.rindex(b',"cache_control"')
    reuse = mark / len(body) if body.startswith(before[:mark]) else 0.0
    return build_us, len(body) / 1024, reuse


async def timed_calls(model: AnthropicModel, fake: FakeAnthropicAPI, reply: Reply) -> list[float]:
    samples = []
    messages = transcript(3)
    for _ in range(ROUNDS):
        fake.push(reply)
        start = time.perf_counter()
        await model.complete(system=SYSTEM, tools=TOOLS, messages=messages)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def no_sleep(delay_s: float) -> None:
    return None


async def bench_calls() -> dict[str, float]:
    async with FakeAnthropicAPI() as fake:
        model = AnthropicModel(
            api_key="k", model=DEFAULT_MODEL, base_url=fake.base_url, sleep=no_sleep
        )
        try:
            text = await timed_calls(model, fake, Reply.text("The pool is exhausted. " * 45))
            tool = await timed_calls(model, fake, Reply.tool("Bash", {"command": "ls " * 100}))
            plain = statistics.median(await timed_calls(model, fake, Reply.text("ok")))
            retried = []
            for _ in range(ROUNDS):
                fake.push(Fault.status(529), Reply.text("ok"))
                start = time.perf_counter()
                await model.complete(system=SYSTEM, tools=TOOLS, messages=transcript(3))
                retried.append((time.perf_counter() - start) * 1000)
        finally:
            await model.aclose()
    p50 = statistics.median(text)
    return {
        "complete_ms_p50": round(p50, 2),
        "complete_ms_p95": round(statistics.quantiles(text, n=20)[-1], 2),
        "tool_call_ms_p50": round(statistics.median(tool), 2),
        "retry_overhead_ms": round(statistics.median(retried) - plain, 2),
    }


def main() -> None:
    build_us, request_kib, reuse = bench_build()
    figures = {
        "build_request_us": round(build_us, 1),
        "request_kib": round(request_kib, 1),
        "prefix_reuse": round(reuse, 3),
        **asyncio.run(bench_calls()),
    }
    print(json.dumps(figures | verdict(figures, {})))  # no goal set yet: met is null


if __name__ == "__main__":
    main()
