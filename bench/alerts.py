"""Benchmark of alert intake: webhook → first status in the thread, and an alert storm's acks.

Run: ``.venv/bin/python bench/alerts.py [--samples 20] [--storm 500] [--problems 40]
[--storm-s 60] [--max-open 5] [--postgres URL]``.

The real webhook (``POST /alerts/<source>`` on its own listener, ``bot.alerts.webhook``),
intake, taker and store (SQLite in a temporary directory, or the PostgreSQL database at
``--postgres``), the real Slack edge's poster against the local fake Slack Web API; the
worker is idle (wake-ups are only recorded), as when an alert arrives at a quiet time.

1. First status: ``--samples`` alerts of distinct problems, one at a time (Alertmanager
   v4 bodies); the clock runs from just before the POST to the moment the fake Slack
   holds the thread's first status message (the agent is on it, with its Stop button).
2. Storm: a child process serves the webhook (``--serve-storm``: the same parts, so the
   sender's own CPU does not slow the server); ``--storm`` generic alerts of ``--problems``
   problems are sent open-loop evenly over ``--storm-s`` seconds (each on its own schedule,
   whatever the answers do), after one warm-up alert; each ack is timed request →
   response. Then the child takes every recorded alert and counts them.

Prints one JSON line:

    first_status_p50_s, first_status_p99_s   webhook → first status message (goal p50 ≤ 1 s)
    storm_ack_p50_ms, storm_ack_p99_ms       the storm's acks (goal p99 ≤ 100 ms)
    storm_alerts, storm_errors               sent, and answered other than 202
    storm_sessions                           sessions the storm started (≤ --max-open)
    alerts_unaccounted                       alerts in no thread nor summary (goal 0)
    storm_take_s                             from the last ack until every alert was taken

and ``goal``, ``met``, ``unmet``, ``load_avg`` (``bench/goals.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
sys.path.append(str(_HERE))  # last, for bench/goals.py alone

from goals import verdict  # noqa: E402

from bot.alerts.intake import AlertPolicy  # noqa: E402
from tests.bot.alerts.alert_support import TOKEN, AlertEdge, alert_edge, payload  # noqa: E402
from tests.bot.slack_edge import CHANNEL  # noqa: E402

GOALS = {
    "first_status_p50_s": ("<=", 1.0),
    "storm_ack_p99_ms": ("<=", 100.0),
    "alerts_unaccounted": ("==", 0),
}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _am_body(n: int) -> dict[str, Any]:
    body = copy.deepcopy(payload("alertmanager_firing"))
    name = f"BenchProblem{n}"
    body["groupKey"] = f'{{}}:{{alertname="{name}"}}'
    body["commonLabels"]["alertname"] = name
    body["commonAnnotations"]["summary"] = f"bench problem {n}"
    body["alerts"][0]["labels"]["alertname"] = name
    return body


def _on_it_count(edge: AlertEdge) -> int:
    messages = edge.edge.slack_api.state.messages.get(CHANNEL, [])
    return sum(1 for m in messages if "thread_ts" in m and "on it" in str(m.get("text", "")))


async def first_status(edge: AlertEdge, samples: int) -> list[float]:
    """Seconds from each POST to its thread's first status message."""
    took = []
    for n in range(samples):
        before = _on_it_count(edge)
        body = _am_body(n)
        started = time.perf_counter()
        answer = await edge.post("alertmanager", body)
        if answer.status_code != 202:
            raise RuntimeError(f"webhook answered {answer.status_code}: {answer.text}")
        await edge.edge.slack_api.wait_for(
            lambda b=before: _on_it_count(edge) > b, timeout_s=30.0, interval_s=0.002
        )
        took.append(time.perf_counter() - started)
    return took


async def serve_storm(tmp: Path, database_url: str | None, max_open: int) -> None:
    """The storm's server (``--serve-storm``, a child process): print the webhook's port,
    wait for a line on stdin (the storm was sent), take everything, print the tally."""
    policy = AlertPolicy(max_open_per_org=max_open, burst_window_s=30.0)
    async with alert_edge(tmp, database_url=database_url, policy=policy) as edge:
        print(json.dumps({"port": edge.port, "org": edge.org}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        started = time.perf_counter()
        await edge.settled()
        tally = await edge.store.tally(edge.org)
        print(
            json.dumps(
                {
                    "received": tally.received,
                    "missing": tally.unaccounted + tally.pending,
                    "sessions": tally.session_threads,
                    "take_s": round(time.perf_counter() - started, 2),
                }
            ),
            flush=True,
        )


async def storm(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Send the storm open-loop to a child process serving the webhook; the ack times and
    what the child took."""
    command = [
        sys.executable,
        __file__,
        "--serve-storm",
        str(tmp),
        "--max-open",
        str(args.max_open),
    ]
    if args.postgres:
        command += ["--postgres", args.postgres]
    child = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert child.stdin is not None
    assert child.stdout is not None
    ready = json.loads(await child.stdout.readline())
    url = f"http://127.0.0.1:{ready['port']}/alerts/generic"
    acks: list[float] = []
    errors = 0
    alerts, problems, duration_s = args.storm, args.problems, args.storm_s
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    async with httpx.AsyncClient(timeout=30.0, trust_env=False, limits=limits) as http:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        await http.post(
            url, json={"key": "warm-up", "title": "warm-up", "id": "w"}, headers=headers
        )
        start = time.perf_counter() + 0.2

        async def one(n: int) -> None:
            nonlocal errors
            await asyncio.sleep(max(0.0, start + n * duration_s / alerts - time.perf_counter()))
            body = {
                "key": f"storm-{n % problems}",
                "title": f"Storm problem {n % problems}",
                "id": f"storm-{n}",
            }
            sent = time.perf_counter()
            try:
                answer = await http.post(url, json=body, headers=headers)
                ok = answer.status_code == 202
            except httpx.HTTPError:
                ok = False
            acks.append((time.perf_counter() - sent) * 1000)
            errors += 0 if ok else 1

        await asyncio.gather(*(one(n) for n in range(alerts)))
    child.stdin.write(b"done\n")
    await child.stdin.drain()
    taken = json.loads(await child.stdout.readline())
    await child.wait()
    return {
        "storm_ack_p50_ms": round(statistics.median(acks), 2),
        "storm_ack_p99_ms": round(_percentile(acks, 0.99), 2),
        "storm_alerts": alerts,
        "storm_errors": errors,
        "storm_sessions": taken["sessions"],
        "alerts_unaccounted": taken["missing"] + (alerts + 1 - taken["received"]),
        "storm_take_s": taken["take_s"],
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {"backend": "postgres" if args.postgres else "sqlite"}
    with tempfile.TemporaryDirectory(prefix="wr-bench-alerts-") as tmp:
        for name in ("a", "b"):
            (Path(tmp) / name).mkdir()
        policy = AlertPolicy(max_open_per_org=args.samples + 1)
        async with alert_edge(Path(tmp) / "a", database_url=args.postgres, policy=policy) as edge:
            took = await first_status(edge, args.samples)
        figures["first_status_p50_s"] = round(statistics.median(took), 3)
        figures["first_status_p99_s"] = round(_percentile(took, 0.99), 3)
        figures |= await storm(args, Path(tmp) / "b")
    figures["storm_max_open"] = args.max_open
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--storm", type=int, default=500)
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--storm-s", type=float, default=60.0)
    parser.add_argument("--max-open", type=int, default=5)
    parser.add_argument("--postgres", default=None, help="a migrated-or-empty database URL")
    parser.add_argument("--serve-storm", type=Path, default=None, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve_storm is not None:
        asyncio.run(serve_storm(arguments.serve_storm, arguments.postgres, arguments.max_open))
    else:
        result = asyncio.run(main(arguments))
        print(json.dumps(result | verdict(result, GOALS)))
