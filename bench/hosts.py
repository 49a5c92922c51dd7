"""Several worker hosts: how often a session loses its sandbox, and what routing costs.
Prints one JSON line:

    replacements_per_100_steps_2_hosts, _3_hosts   sandbox replacements (``sandbox_replaced``
        notices) per 100 tool steps, with 2 and 3 real worker hosts on this machine (each
        its own ``WARROOM_HOST_ID`` and data directory, so each reaches only its own jails,
        as separate machines would), all hosts alive throughout (goal 0 with routing)
    replacements_per_100_steps_2_hosts_unrouted, _3_hosts_unrouted   the same with
        ``WARROOM_HOST_ROUTING=false``: every step on the shared queue, as before issue #30
    step_ms_one_host, step_ms_routed_1_host, step_ms_routed_2_hosts   median time of one step
        (a session's span from its first to its last event, over its steps), sessions one
        after another: one host without routing, one host with it, two hosts with it; the
        three are measured in turns (``--rounds``), so the machine's load drifts over all
    routing_overhead_ratio   step_ms_routed_2_hosts / step_ms_one_host (goal ≤ 1.1)
    routing_overhead_ratio_1_host   step_ms_routed_1_host / step_ms_one_host: the routing's
        own cost (a lookup per enqueue, the host's queue), without a second host's load

Each session writes a file in ``/workspace`` per tool step and counts them, against the
fake Anthropic API answering at once; ``WARROOM_CARRY_ON_S=0`` sends every step through
the queue (a real model's call outlasts the 1 s a worker carries a session on). The hosts
otherwise run the shipped settings (sweeps, watcher, heartbeats).

    .venv/bin/python bench/hosts.py [--sessions 4] [--tool-steps 10] [--rounds 3]
        [--timing-sessions 2] [--unrouted-only] [--redis-url URL]

``--unrouted-only`` measures only the replacements without routing (also runs where the
routing does not exist: the figure before issue #30).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, not bench/*.py

from goals import verdict  # bench/ is on the path when run as a script

from bot.fakes.anthropic_api import Reply
from tests.bot.durable_support import Probe
from tests.bot.hosts_support import (
    HostCluster,
    probing,
    replacements,
    running_hosts,
)

GOALS = {
    "replacements_per_100_steps_2_hosts": ("==", 0),
    "replacements_per_100_steps_3_hosts": ("==", 0),
    "routing_overhead_ratio": ("<=", 1.1),
}
ROUTED = {
    # the shipped sweep, watcher and heartbeat intervals: an idle host costs what it would
    "WARROOM_CARRY_ON_S": "0",
    "dramatiq_worker_timeout": "100",  # as `warroom worker` sets them
    "dramatiq_queue_prefetch": "2",
}
UNROUTED = {**ROUTED, "WARROOM_HOST_ROUTING": "false"}


def plan(tool_steps: int) -> list[Reply]:
    """Write one file per tool step, count the files; then answer."""
    calls = [
        Reply.tool(
            "Bash",
            {"command": f"echo {n} > /workspace/f{n}.txt && ls /workspace | wc -l"},
        )
        for n in range(1, tool_steps + 1)
    ]
    return [*calls, Reply.text("Done.")]


async def run_sessions(
    probe: Probe, *, sessions: int, tool_steps: int, together: bool
) -> tuple[int, list[float]]:
    """Run the sessions (all at once, or one after another); returns the replacements
    they were told of and each one's time per step (ms)."""
    ids = [f"bench-{uuid.uuid4().hex[:8]}" for _ in range(sessions)]
    if together:
        for session_id in ids:
            await probe.start(session_id, plan(tool_steps))
    step_ms = []
    replaced = 0
    for session_id in ids:
        if not together:
            await probe.start(session_id, plan(tool_steps))
        await probe.wait_answered(session_id, timeout_s=600)
        events = await probe.events(session_id)
        replaced += replacements(events)
        span_s = (events[-1].created_at - events[0].created_at).total_seconds()
        step_ms.append(1000 * span_s / (2 * tool_steps + 1))
    return replaced, step_ms


def measure(
    redis_url: str,
    *,
    hosts: int,
    settings: dict[str, str],
    sessions: int,
    tool_steps: int,
    together: bool,
) -> tuple[int, list[float]]:
    """Start ``hosts`` hosts with ``settings`` and run the sessions on them."""
    with running_hosts(redis_url, name="warroom_bench_hosts", hosts=hosts, settings=settings) as c:

        async def run(cluster: HostCluster) -> tuple[int, list[float]]:
            async with probing(cluster) as probe:
                return await run_sessions(
                    probe, sessions=sessions, tool_steps=tool_steps, together=together
                )

        return asyncio.run(run(c))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--tool-steps", type=int, default=10)
    parser.add_argument("--timing-sessions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--unrouted-only", action="store_true")
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("WARROOM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
    )
    args = parser.parse_args()
    tool_steps_total = args.sessions * args.tool_steps
    figures: dict[str, object] = {
        "sessions": args.sessions,
        "tool_steps_per_session": args.tool_steps,
    }
    kinds = [("_unrouted", UNROUTED)]
    if not args.unrouted_only:
        kinds.insert(0, ("", ROUTED))
    for hosts in (2, 3):
        for suffix, settings in kinds:
            replaced, _ = measure(
                args.redis_url,
                hosts=hosts,
                settings=dict(settings),
                sessions=args.sessions,
                tool_steps=args.tool_steps,
                together=True,
            )
            key = f"replacements_per_100_steps_{hosts}_hosts{suffix}"
            figures[key] = round(100 * replaced / tool_steps_total, 1)
    if args.unrouted_only:
        print(json.dumps(figures))
        return
    timed: dict[str, list[float]] = {"one_host": [], "routed_1_host": [], "routed_2_hosts": []}
    shapes = (
        ("one_host", 1, UNROUTED),
        ("routed_1_host", 1, ROUTED),
        ("routed_2_hosts", 2, ROUTED),
    )
    for _ in range(args.rounds):
        for name, hosts, settings in shapes:
            _, step_ms = measure(
                args.redis_url,
                hosts=hosts,
                settings=dict(settings),
                sessions=args.timing_sessions,
                tool_steps=args.tool_steps,
                together=False,
            )
            timed[name] += step_ms
    median = {name: statistics.median(values) for name, values in timed.items()}
    for name, value in median.items():
        figures[f"step_ms_{name}"] = round(value, 1)
    ratio = median["routed_2_hosts"] / median["one_host"]
    figures["routing_overhead_ratio"] = round(ratio, 3)
    figures["routing_overhead_ratio_1_host"] = round(
        median["routed_1_host"] / median["one_host"], 3
    )
    print(json.dumps({**figures, **verdict(figures, GOALS)}))


if __name__ == "__main__":
    main()
