"""Benchmark of the Slack app's ack: signed HTTP events at a fixed rate, request → response.

Run: ``.venv/bin/python bench/slack_ack.py [--rate 50] [--duration-s 20] [--rounds 4]
[--postgres [ADMIN_URL]]``.

A child process serves the real app (bolt ``AsyncApp`` over aiohttp, ``build_app``)
with a migrated store (SQLite in a temporary directory by default; with
``--postgres``, a throwaway database created through ``ADMIN_URL`` and dropped
after) and the local fake Slack Web API; ``enqueue`` only counts. This process
sends events open-loop at ``rate`` per second, each on its own schedule whatever the
answers do: ~70 % new top-level mentions (each a new session), ~20 % steering replies
in threads started earlier, ~10 % the ``message`` twin of an earlier mention (dropped
by the ``<channel>:<ts>`` dedupe). The clock runs from just before the request is sent
(body already signed) to the response. Prints one JSON line:

    ack_p50_ms, ack_p99_ms, ack_max_ms   request → response of the acked events (Slack
                                         allows 3 s; goal p99 ≤ 1.5× the peer's)
    events, errors                       sent, and answered other than HTTP 200 (or not at all)
    unacked                              errors plus acks later than 3 s (Slack retries both;
                                         goal 0)
    rate_per_s, duration_s, backend      the load and the store
    sessions_woken                       wake-ups the server enqueued (one per new session
                                         here: no worker runs), a check that the work was done
    cpu_ms_per_event                     the server process's CPU time (user + system, from
                                         /proc/<pid>/stat, all its threads) from the end of
                                         the warm-up request to the last answer, per event

With ``--postgres`` the same load also runs against the peer (``slack_ack_peer.py``: bare
bolt plus raw asyncpg doing the same three writes before the ack), in ``--rounds``
alternating rounds of ``--duration-s`` each (Warroom first, then the peer first), each on a
fresh database; ``peer`` holds its figures, and:

    rounds_p99                           per round: both p99s and their ratio (a p99 pooled
                                         over rounds would let a quiet round hide a loaded one)
    p99_vs_peer                          the median over rounds of that ratio (goal ≤ 1.5)
    cpu_per_event_vs_peer                CPU per event against the peer's, over all rounds
                                         (goal ≤ 1.2)

and, as every bench, ``goal``, ``met``, ``unmet`` and ``load_avg`` (``bench/goals.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from goals import verdict  # bench/ is on the path when run as a script
from slack_ack_peer import serve_peer  # bench/ is on the path when run as a script
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.app import SlackDeps, build_app
from bot.slack.background import Background
from bot.slack.modes import HttpMode, start
from bot.slack.poster import SlackPoster
from bot.slack.skills.command import SkillsCommands
from bot.slack.skills.edit_policy import EditPolicy
from memory_store import Cancelled, Database, FileStore, InboundDedupe, Outbox, SessionStore
from tests import pg_admin
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlackApi

SECRET = "bench-signing-secret"
SLACK_ACK_DEADLINE_MS = 3000  # Slack: an event not acked within 3 s is retried
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CHANNEL = "C0BENCH"
GOALS_SQLITE: dict[str, tuple[str, float]] = {"unacked": ("==", 0)}
GOALS = GOALS_SQLITE | {"p99_vs_peer": ("<=", 1.5), "cpu_per_event_vs_peer": ("<=", 1.2)}
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) process ``pid`` has used so far.

    Linux ``proc(5)``: fields 14 and 15 of ``/proc/<pid>/stat``, in clock ticks."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command name, field 3 on
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


# ----- the server (child process) ----------------------------------------------------


async def serve(database_url: str | None, *, peer: bool = False) -> None:
    """Serve the app until stdin closes; print the port first, the wake-ups enqueued last.

    ``peer``: serve ``slack_ack_peer`` (bolt + raw asyncpg) instead; needs PostgreSQL.
    """
    slack_api = FakeSlackApi()
    await slack_api.start()
    if peer:
        assert database_url is not None, "the peer needs PostgreSQL"
        await serve_peer(
            database_url, signing_secret=SECRET, token=slack_api.token, base_url=slack_api.base_url
        )
        await slack_api.stop()
        return
    # what ``warroom serve`` has loaded before it listens (its durable wiring imports the
    # step's modules), so no first event here pays an import on the event loop
    importlib.import_module("bot.cli.serve")
    with tempfile.TemporaryDirectory() as data_dir:
        db = Database.from_url(database_url, data_dir=Path(data_dir))
        await db.migrate()
        background, wakes = Background(), []
        app = build_app(deps=_deps(db, slack_api, wakes), background=background)
        running = await start(app, HttpMode(host="127.0.0.1", port=0))
        print(running.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await running.close()
        await background.drain(timeout_s=30.0)
        print(len(wakes), flush=True)
        await db.dispose()
    await slack_api.stop()


def _deps(db: Database, slack_api: FakeSlackApi, wakes: list[str]) -> SlackDeps:
    client = AsyncWebClient(token=slack_api.token, base_url=slack_api.base_url)
    files = FileStore(db)

    async def enqueue(session_id: str, token: str) -> None:
        wakes.append(session_id)

    async def cancel_running(cancelled: Cancelled) -> None:
        return None

    return SlackDeps(
        sessions=SessionStore(db),
        dedupe=InboundDedupe(db),
        files=files,
        client=client,
        signing_secret=SECRET,
        bot_user_id=BOT_USER_ID,
        enqueue=enqueue,
        cancel_running=cancel_running,
        skills=SkillsCommands(files, client, EditPolicy()),
        poster=SlackPoster(client, Outbox(db)),
    )


# ----- the load (this process) -------------------------------------------------------


class Traffic:
    """Event bodies: new mentions, steering replies in earlier threads, mention twins."""

    def __init__(self, seed: int = 7) -> None:
        self._random = random.Random(seed)
        self._n = 0
        self._threads: list[str] = []

    def next_body(self) -> dict[str, Any]:
        self._n += 1
        roll = self._random.random()
        if roll < 0.2 and self._threads:
            return self._event("message", self._ts(), thread_ts=self._pick(), text="check the pool")
        if roll < 0.3 and self._threads:
            return self._event("message", self._pick(), text=f"<@{BOT_USER_ID}> pods are down")
        ts = self._ts()
        self._threads.append(ts)
        return self._event("app_mention", ts, text=f"<@{BOT_USER_ID}> pods are down #{self._n}")

    def _pick(self) -> str:
        return self._random.choice(self._threads[-200:])

    def _ts(self) -> str:
        return f"{1767225600 + self._n}.{self._n:06d}"

    def _event(
        self, kind: str, ts: str, *, text: str, thread_ts: str | None = None
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "type": kind,
            "user": "U0BENCHUSER",
            "text": text,
            "ts": ts,
            "channel": CHANNEL,
            "event_ts": ts,
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        return {
            "team_id": TEAM_ID,
            "api_app_id": "A0BENCH",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev0BENCH{self._n:07d}",
            "event_time": int(float(ts)),
            "authorizations": [{"enterprise_id": None, "team_id": TEAM_ID, "is_bot": True}],
        }


def signed(body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    raw = json.dumps(body).encode()
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), b"v0:" + ts.encode() + b":" + raw, hashlib.sha256)
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": "v0=" + digest.hexdigest(),
    }
    return raw, headers


async def one(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> float | None:
    raw, headers = signed(body)
    started = time.perf_counter()
    try:
        response = await client.post(url, content=raw, headers=headers)
    except httpx.HTTPError:
        return None
    elapsed_ms = (time.perf_counter() - started) * 1000
    return elapsed_ms if response.status_code == 200 else None


async def load(
    url: str, *, rate: float, duration_s: float, server_pid: int
) -> tuple[list[float | None], float]:
    """Send the events; returns their ack times (None: failed) and the server's CPU-s."""
    traffic = Traffic()
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(timeout=10.0, limits=limits) as client:
        await one(client, url, traffic.next_body())  # warm-up: bolt's auth.test, connections
        cpu_before_s = cpu_s(server_pid)
        count = int(rate * duration_s)
        begin = time.perf_counter()
        tasks = []
        for i in range(count):
            delay_s = begin + i / rate - time.perf_counter()
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            tasks.append(asyncio.create_task(one(client, url, traffic.next_body())))
        results = list(await asyncio.gather(*tasks))
        return results, cpu_s(server_pid) - cpu_before_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--duration-s", type=float, default=20.0)
    parser.add_argument("--postgres", nargs="?", const=PG_ADMIN_URL, default=None)
    parser.add_argument("--database-url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.database_url, peer=args.peer))
        return
    if args.postgres is None:
        results, wakes, cpu = measure(None, args)
        ours = {**figures(results, args, cpu), "sessions_woken": wakes}
        print(json.dumps(ours | verdict(ours, GOALS_SQLITE)))
        return
    print(json.dumps(with_peer(args)))


def with_peer(args: argparse.Namespace) -> dict[str, Any]:
    """Warroom and the peer on PostgreSQL, in alternating rounds (fresh databases each)."""
    runs: dict[str, list[float | None]] = {"warroom": [], "peer": []}
    cpu = {"warroom": 0.0, "peer": 0.0}
    rounds = []
    wakes = 0
    for n in range(args.rounds):
        p99s = {}
        # ABBA: Warroom first in even rounds, the peer first in odd ones, so whatever
        # follows a run falls on both alike (on this machine the third run of a sequence
        # had a p99 2-8x the others, whichever side ran it: the same run first in each
        # round put it on Warroom every time)
        for who in list(runs) if n % 2 == 0 else list(runs)[::-1]:
            name = f"warroom_bench_{uuid.uuid4().hex[:12]}"
            pg_admin.create_database(args.postgres, name)
            try:
                url = urlunsplit(urlsplit(args.postgres)._replace(path=f"/{name}"))
                results, woken, used_s = measure(url, args, peer=who == "peer")
            finally:
                pg_admin.drop_database(args.postgres, name)
            runs[who] += results
            cpu[who] += used_s
            p99s[who] = figures(results, args, used_s)["ack_p99_ms"]
            wakes += woken if who == "warroom" else 0
        ratio = p99s["warroom"] / p99s["peer"] if p99s["warroom"] and p99s["peer"] else None
        rounds.append(p99s | {"ratio": round(ratio, 2) if ratio else None})
    ours = figures(runs["warroom"], args, cpu["warroom"])
    peer = figures(runs["peer"], args, cpu["peer"])
    ratios = [r["ratio"] for r in rounds if r["ratio"] is not None]
    results = {
        **ours,
        "sessions_woken": wakes,
        "rounds": args.rounds,
        "peer": peer,
        "rounds_p99": rounds,
        "p99_vs_peer": round(statistics.median(ratios), 2) if len(ratios) == len(rounds) else None,
        "cpu_per_event_vs_peer": round(ours["cpu_ms_per_event"] / peer["cpu_ms_per_event"], 2)
        if peer["cpu_ms_per_event"]
        else None,
    }
    return results | verdict(results, GOALS)


def measure(
    database_url: str | None, args: argparse.Namespace, *, peer: bool = False
) -> tuple[list[float | None], int, float]:
    """Start the server child on ``database_url``, run the load, stop the child.

    Returns the ack times (None: failed), how many wake-ups the server enqueued and the
    CPU seconds the server used under the load.
    """
    command = [sys.executable, __file__, "--serve"]
    if database_url:
        command += ["--database-url", database_url]
    if peer:
        command += ["--peer"]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/slack/events"
        results, used_s = asyncio.run(
            load(url, rate=args.rate, duration_s=args.duration_s, server_pid=server.pid)
        )
    finally:
        with contextlib.suppress(BrokenPipeError):
            assert server.stdin is not None
            server.stdin.close()
        wakes = server.stdout.readline() if server.stdout is not None else ""
        server.wait(timeout=60)
    return results, int(wakes or 0), used_s


def figures(results: list[float | None], args: argparse.Namespace, used_s: float) -> dict[str, Any]:
    times = sorted(t for t in results if t is not None)
    late = sum(1 for t in times if t > SLACK_ACK_DEADLINE_MS)
    return {
        "ack_p50_ms": round(statistics.median(times), 2) if times else None,
        "ack_p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2)
        if times
        else None,
        "ack_max_ms": round(times[-1], 2) if times else None,
        "events": len(results),
        "errors": len(results) - len(times),
        "unacked": len(results) - len(times) + late,
        "rate_per_s": args.rate,
        "duration_s": args.duration_s,
        "backend": "postgresql" if args.postgres else "sqlite",
        "cpu_ms_per_event": round(used_s * 1000 / len(results), 3) if results else None,
    }


if __name__ == "__main__":
    main()
