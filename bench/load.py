"""Benchmark of sessions under load: answer latency and step gaps at 20 and 60 sessions.

Run: ``.venv/bin/python bench/load.py [--sessions 20 60] [--workers 3] [--threads 8]
[--redis redis://127.0.0.1:6379/14] [--deadline-s 300] [--deploy-after-s 3]``.

With ``--deploy-after-s``, each round is also a deploy: that long after the mentions the
old worker group gets SIGTERM and a new one starts at once; ``old_workers_exit_s`` is how
long the old group took to exit (goal ≤ 20 s, issue #32.2).

The real shape, in real processes: ``warroom serve`` in HTTP mode and ``warroom worker``
(``--workers`` processes × ``--threads`` threads) over Redis and a throwaway PostgreSQL
database; this process serves the fake Slack Web API (Slack's rate limits on, 60-second
windows: ``chat.update`` Tier 3, 50 a minute per workspace) and the fake Messages API. Each
round starts a fresh stack and sends N signed top-level @mentions at once, each in its own
channel; each session's script is five model calls with four ``TodoWrite`` steps between
(each step shows progress in the session's status message), then the answer.

Prints one JSON line:

    rounds: per N, sessions, answered, answer_p50_s / answer_p99_s (mention sent → answer
            posted), max_step_gap_s (the longest wait of any session between two of its
            model calls, or before its first / after its last until the answer),
            chat_update_calls, slack_429s and misread_answers (answers whose text names
            another session than the thread they went to: the script misread a
            request; 0 unless the way a session is found in a request breaks)
    p50_ratios      per repetition (``--repeat``: the sizes run interleaved, 20, 60, 20,
                    60, …, so the host's changing load hits both alike), the largest N's
                    p50 over the smallest N's (the floor, same repetition)
    p50_ratio       the largest of them
    goal, met       p50_ratio ≤ 3 and every max_step_gap_s ≤ 15 (issue #32)

Each round also gives ``takeovers`` (steps of live workers fenced because another worker
took their session over: a lease renewal came too late) and ``load_avg``.

Measured on a shared 2-core machine (other jobs running), 3 × 8 threads:

    status awaited by the step (before the status board):
        20: p50 7.8 s, p99 8.6 s, gap 2.6 s; 60: p50 129.7 s, p99 190.0 s, gap 168.7 s
        p50_ratio 16.7, met false
    status written off the step (``bot/slack/status_board.py``), two runs:
        20: p50 11.1 s, p99 11.8 s, gap 5.0 s; 60: p50 19.8 s, p99 21.0 s, gap 7.7 s
        p50_ratio 1.78, met true
        20: p50 6.7 s, p99 7.1 s, gap 2.8 s; 60: p50 21.3 s, p99 23.9 s, gap 8.0 s
        p50_ratio 3.2, met false (three times the steps on two shared cores: the
        workers are CPU-bound here, so the ratio sits near 3 with nothing waiting on Slack)

A deploy (``--sessions 20 --deploy-after-s 3``), same machine: the old group exited 7.0 s
and 7.3 s after SIGTERM, 20/20 answered, but p50 52–68 s and a step gap of 48–64 s: the new
group took ~46 s from its start to "ready for action" on the loaded machine (log times), and
the old one takes no new step from the signal on, so sessions wait for the new group's boot.
Give the model time (``--model-latency-s 1``): with an instant model 20 sessions end before a
SIGTERM at 3 s on a quiet host. With it, at load 19–38 on the shared host: main's workers
(each process importing the code) ready 78–85 s after the signal, longest gap 82–88 s; with
the code imported once before Dramatiq forks (``bot.durable.launcher``, run inside
``warroom worker``) ready 24.5 s, gap 34.7 s, old group out in 12 s, no takeover.

Each round flushes Redis first, so the shared ``chat.update`` budget starts as after a
Redis restart (``AFTER_RESET_CALLS`` turns in the first minute): ``chat_update_calls``
counts what was sent by the time the last answer was posted (or the deadline: a round
that runs past a minute sends the next window's 45 too).

An answer is found by its thread: session ``bN``'s mention and answer are in channel
``channel_of("bN")``, and the script finds the session of a request by the *last*
``[session:bN]`` marker of its first message (``session_of``). It took the first one
until then: since each answer indexes its incident's summary (issue #29) and every mention
of a round reads alike, a session whose first step came after another session answered
had that one's marker quoted in its context first (a related past incident), was scripted
as that session, and posted "Load answer for" the other one. Its own answer looked lost,
the round ran to its deadline (hence 50 ``chat.update`` calls: a minute's 5 after the
reset, then a whole window's 45), and its step times went to the other session. It struck
on a quiet host, where the first sessions answer within a carry-on while later ones wait
for their first step: 58/60, 60/60 and 26/60 "answered" in three rounds of 60 before the
fix. Six mentions sent once the first had answered: all six answers posted at once, five
of them "for b0". ``--sessions 20 60 --repeat 2`` on the shared 2-core host (load 9-14):
before, one round of 60 "answered" 54 and ran to its deadline (46 ``chat.update``); after,
every round answered all, ``misread_answers`` 0, 60-session p50 10.5 s and 32.7 s (ratios
1.54 and 3.31: the second at load 13.7, the workers CPU-bound), longest gap 11.5 s.

With Slack's agent surface on (the default since issue #28), the same host at load 2.4-3.8:
before, a 60-session round answered 31 of 60 within 300 s with 196 HTTP 429s (each worker
kept its own ``chat.startStream``/``chat.stopStream`` budget of Tier 2, every answer
waited for its stream's close, and this bench counted only answers posted as messages);
after (shared per-method budgets, no step waits for a turn, a stream's start takes its
status turn before its claim), ``--repeat 2`` plus one round: 20/20 and 60/60 answered,
p50 2.87-3.27 s at 20 and 6.44-7.98 s at 60, ratios 2.01, 2.37 and 2.44, longest gap 5.3 s,
0 429s. A deploy of 20 (``--deploy-after-s 3 --model-latency-s 1``, load 4.8): old group
out in 11.7 s, new ready in 8.6 s, longest gap 11.7 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import redis

from bot.cli.worker import dramatiq_argv
from bot.durable.actors import WORKER_TIMEOUT_MS
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.fakes.slack_api import FakeSlackApi
from memory_store import Database
from tests import pg_admin

SECRET = "bench-signing-secret"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
WARROOM = str(Path(sys.executable).parent / "warroom")
TEAM = "T0FAKETEAM"
BOT = "U0FAKEBOT"
TODO_STEPS = 4
GOAL_RATIO = 3.0
GOAL_GAP_S = 15.0
_MARKER = re.compile(r"\[session:(b\d+)\]")
FENCED_LINE = "step fenced"  # a live worker's step whose claim another worker took over


def session_of(messages: list[dict[str, Any]]) -> str:
    """The bench session (``bN``) a model request is for: the last marker of its first
    message, "?" without one. The person's text comes last there; a marker before it is
    another session's, quoted in the context block (a related past incident's title: each
    answer indexes its incident's summary, and every mention of a round is alike)."""
    found = _MARKER.findall(json.dumps(messages[0])) if messages else []
    return str(found[-1]) if found else "?"


def channel_of(session: str) -> str:
    """The channel of bench session ``bN``, where its mention and answer are (each
    session has its own).

    >>> channel_of("b7")
    'C0LOAD0007'
    """
    return f"C0LOAD{int(session.removeprefix('b')):04d}"


class Script:
    """The fake model's script: per session, TODO_STEPS TodoWrite calls then the answer;
    records when each session's requests came (this process's monotonic clock)."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.messages
        session = session_of(messages)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        with self._lock:
            self.times.setdefault(session, []).append(time.monotonic())
        if turn >= TODO_STEPS:
            return Reply.text(f"Load answer for {session}: the pool is exhausted.")
        todos = [
            {
                "content": f"Check item {i}",
                "status": "completed" if i < turn else "in_progress" if i == turn else "pending",
                "activeForm": f"Checking item {i}",
            }
            for i in range(TODO_STEPS)
        ]
        return Reply.tool("TodoWrite", {"todos": todos})


class ServiceLoop:
    """An event loop in a daemon thread serving the fakes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def run(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(60)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sign(body: bytes, ts: int) -> str:
    base = b"v0:" + str(ts).encode() + b":" + body
    return "v0=" + hmac.new(SECRET.encode(), base, hashlib.sha256).hexdigest()


def mention(n: int, channel: str, ts: str) -> dict[str, Any]:
    text = f"<@{BOT}> [session:b{n}] checkout-api 500s since 14:02, check the pods"
    return {
        "token": "x",
        "team_id": TEAM,
        "api_app_id": "A0FAKEAPP",
        "type": "event_callback",
        "event_id": f"Ev0LOAD{uuid.uuid4().hex[:10]}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": TEAM, "user_id": BOT, "is_bot": True}],
        "event": {
            "type": "app_mention",
            "user": "U0FAKEALICE",
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "channel": channel,
            "team": TEAM,
        },
    }


async def post_signed(http: httpx.AsyncClient, url: str, body: Mapping[str, Any]) -> None:
    raw = json.dumps(body).encode()
    ts = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": sign(raw, ts),
    }
    response = await http.post(url, content=raw, headers=headers)
    response.raise_for_status()


def wait_up(url: str, deadline_s: float = 180.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def wait_workers(log_path: Path, count: int, deadline_s: float = 180.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if log_path.read_text(errors="replace").count("is ready for action") >= count:
            return
        time.sleep(0.2)
    raise RuntimeError(f"workers not ready:\n{log_path.read_text(errors='replace')[-3000:]}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_round(sessions: int, args: argparse.Namespace) -> dict[str, Any]:
    """One fresh stack, ``sessions`` mentions at once; the figures of the round."""
    service, script = ServiceLoop(), Script()
    model = FakeAnthropicAPI(script, latency_s=args.model_latency_s)
    slack = FakeSlackApi()
    service.run(model.__aenter__())
    service.run(slack.start())
    database = f"warroom_bench_load_{uuid.uuid4().hex[:10]}"
    pg_admin.create_database(PG_ADMIN_URL, database)
    admin = urlsplit(PG_ADMIN_URL)
    db_url = urlunsplit(admin._replace(scheme="postgresql+asyncpg", path=f"/{database}"))
    data_dir = Path(tempfile.mkdtemp(prefix="wr-load-"))
    redis.Redis.from_url(args.redis).flushdb()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        asyncio.run(_migrate(db_url, data_dir))
        port = free_port()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("WARROOM_", "SLACK_", "ANTHROPIC_", "dramatiq_"))
        } | {
            "DATABASE_URL": db_url,
            "REDIS_URL": args.redis,
            "ANTHROPIC_API_KEY": "sk-ant-bench",
            "ANTHROPIC_BASE_URL": model.base_url,
            "SLACK_BOT_TOKEN": slack.token,
            "SLACK_API_URL": slack.base_url,
            "SLACK_SIGNING_SECRET": SECRET,
            "WARROOM_SLACK_MODE": "http",
            "SLACK_HTTP_PORT": str(port),
            "WARROOM_DATA_DIR": str(data_dir),
            "PYTHONUNBUFFERED": "1",
            # as ``warroom worker`` sets them (``--plain-dramatiq`` runs without it)
            "dramatiq_worker_timeout": str(WORKER_TIMEOUT_MS),
            "dramatiq_queue_prefetch": str(args.threads),
        }
        if args.lease_s is not None:  # the default's peer: takeovers of live steps by lease
            env["WARROOM_LEASE_S"] = str(args.lease_s)
        worker_log = data_dir / "worker.log"
        command = worker_command(args)
        with worker_log.open("wb") as log:
            processes.append(
                subprocess.Popen(
                    command,
                    env=env,
                    cwd=data_dir,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        with (data_dir / "serve.log").open("wb") as log:
            processes.append(
                subprocess.Popen(
                    [WARROOM, "serve"],
                    env=env,
                    cwd=data_dir,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        wait_up(f"http://127.0.0.1:{port}/healthz")
        wait_workers(worker_log, args.workers)
        sent = asyncio.run(_send_all(sessions, f"http://127.0.0.1:{port}/slack/events", slack))
        exited: dict[str, float] = {}
        ready_s = None
        if args.deploy_after_s is not None:
            time.sleep(args.deploy_after_s)  # the bench's schedule: sessions are mid-turn
            new, ready_s = _deploy(processes[0], command, env, data_dir, args, exited)
            processes.append(new)
        answered = _wait_answers(slack, sessions, args.deadline_s)
        figures = _figures(sessions, sent, answered, script, slack)
        if args.deploy_after_s is not None:
            deadline = time.monotonic() + 120
            while "s" not in exited and time.monotonic() < deadline:
                time.sleep(0.2)
            figures["old_workers_exit_s"] = round(exited["s"], 1) if "s" in exited else None
            figures["new_workers_ready_s"] = round(ready_s, 1) if ready_s is not None else None
        logs = [p.read_text(errors="replace") for p in data_dir.glob("worker*.log")]
        figures["takeovers"] = sum(text.count(FENCED_LINE) for text in logs)
        return figures
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        service.run(model.__aexit__(None, None, None))
        service.run(slack.stop())
        pg_admin.drop_database(PG_ADMIN_URL, database)
        if args.keep:
            print(f"logs kept in {data_dir}", file=sys.stderr)
        else:
            subprocess.run(["rm", "-rf", str(data_dir)], check=False)


def _deploy(
    old: subprocess.Popen[bytes],
    command: list[str],
    env: dict[str, str],
    data_dir: Path,
    args: argparse.Namespace,
    exited: dict[str, float],
) -> tuple[subprocess.Popen[bytes], float]:
    """A deploy: SIGTERM to the old worker group, new workers started at once; the old
    group's exit time (seconds from the signal) lands in ``exited["s"]``. Returns the new
    group and how long from the signal its processes took to be ready."""
    signalled = time.monotonic()
    os.killpg(old.pid, signal.SIGTERM)

    def wait_old() -> None:
        old.wait()
        exited["s"] = time.monotonic() - signalled

    threading.Thread(target=wait_old, daemon=True).start()
    log_path = data_dir / "worker-new.log"
    with log_path.open("wb") as log:
        new = subprocess.Popen(
            command,
            env=env,
            cwd=data_dir,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wait_workers(log_path, args.workers)
    return new, time.monotonic() - signalled


def worker_command(args: argparse.Namespace) -> list[str]:
    """``warroom worker``, or with ``--plain-dramatiq`` the Dramatiq CLI as ``warroom
    worker`` ran it before ``bot.durable.launcher`` (each process imports the code)."""
    if not args.plain_dramatiq:
        return [WARROOM, "worker", "--processes", str(args.workers), "--threads", str(args.threads)]
    argv = dramatiq_argv(processes=args.workers, threads=args.threads, with_metrics=False)
    return [argv[0], "-m", "dramatiq", *argv[3:]]


async def _migrate(url: str, data_dir: Path) -> None:
    db = Database.from_url(url, data_dir=data_dir)
    try:
        await db.migrate()
    finally:
        await db.dispose()


async def _send_all(sessions: int, url: str, slack: FakeSlackApi) -> dict[str, float]:
    """Seed each mention in its channel, then deliver them all at once; send times."""
    bodies = []
    for n in range(sessions):
        channel = channel_of(f"b{n}")
        ts = slack.add_message(channel, f"<@{BOT}> [session:b{n}] checkout-api 500s")
        bodies.append((f"b{n}", mention(n, channel, ts)))
    sent: dict[str, float] = {}
    async with httpx.AsyncClient(timeout=30) as http:

        async def one(name: str, body: dict[str, Any]) -> None:
            sent[name] = time.monotonic()
            await post_signed(http, url, body)

        await asyncio.gather(*(one(name, body) for name, body in bodies))
    return sent


ANSWER_METHODS = frozenset({"chat.postMessage", "chat.stopStream"})
"""The methods that carry an answer: a message, or the stream it closes (agent surface)."""


def _answer_posts(slack: FakeSlackApi) -> list[tuple[str, str, float]]:
    """The answers posted, oldest first: (the session the text names, the channel it was
    posted in, when). An answer is a message (``chat.postMessage``) or, on Slack's agent
    surface, the blocks that close the turn's stream (``chat.stopStream``)."""
    posts = []
    for call in list(slack.calls):
        if call.method not in ANSWER_METHODS or not call.response.get("ok"):
            continue
        matched = re.search(r"Load answer for (b\d+)", json.dumps(call.args))
        if matched:
            posts.append((matched.group(1), str(call.args.get("channel")), call.at_s))
    return posts


def _answers(slack: FakeSlackApi) -> dict[str, float]:
    """When each session's answer was posted: its first answer naming it, in its own
    channel (an answer naming another session is a misread request: ``misread_answers``)."""
    found: dict[str, float] = {}
    for session, channel, at in _answer_posts(slack):
        if channel == channel_of(session) and session not in found:
            found[session] = at
    return found


def _wait_answers(slack: FakeSlackApi, sessions: int, deadline_s: float) -> dict[str, float]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        answered = _answers(slack)
        if len(answered) >= sessions:
            return answered
        time.sleep(0.5)
    return _answers(slack)


def _figures(
    sessions: int,
    sent: dict[str, float],
    answered: dict[str, float],
    script: Script,
    slack: FakeSlackApi,
) -> dict[str, Any]:
    latencies = [answered[s] - sent[s] for s in answered]
    gaps = []
    for name, at in answered.items():
        marks = [sent[name], *sorted(script.times.get(name, [])), at]
        gaps.append(max(b - a for a, b in itertools.pairwise(marks)))
    calls = list(slack.calls)
    return {
        "sessions": sessions,
        "answered": len(answered),
        "answer_p50_s": round(statistics.median(latencies), 2) if latencies else None,
        "answer_p99_s": round(percentile(latencies, 0.99), 2) if latencies else None,
        "max_step_gap_s": round(max(gaps), 2) if gaps else None,
        "chat_update_calls": sum(1 for c in calls if c.method == "chat.update"),
        "slack_429s": sum(1 for c in calls if c.status == 429),
        "misread_answers": sum(1 for s, c, _ in _answer_posts(slack) if c != channel_of(s)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[20, 60])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--deadline-s", type=float, default=300.0)
    parser.add_argument("--keep", action="store_true", help="keep each round's logs")
    parser.add_argument(
        "--model-latency-s",
        type=float,
        default=0.0,
        help="the fake model waits this long before each reply (sessions last, as real ones)",
    )
    parser.add_argument(
        "--plain-dramatiq",
        action="store_true",
        help="start workers with Dramatiq's own CLI (no preload: the peer of a deploy run)",
    )
    parser.add_argument(
        "--deploy-after-s",
        type=float,
        default=None,
        help="SIGTERM the workers this long after the mentions and start new ones at once",
    )
    parser.add_argument(
        "--lease-s",
        type=float,
        default=None,
        help="the workers' WARROOM_LEASE_S (default: the setting's default)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the sizes this many times, interleaved (20, 60, 20, 60, …): one ratio each",
    )
    args = parser.parse_args()
    rounds, ratios = [], []
    for _ in range(args.repeat):
        sizes = [run_round(n, args) | {"load_avg": _load_avg()} for n in args.sessions]
        rounds += sizes
        floor, top = sizes[0], sizes[-1]
        if floor["answer_p50_s"] and top["answer_p50_s"]:
            ratios.append(round(top["answer_p50_s"] / floor["answer_p50_s"], 2))
    # every repetition must meet the ratio: "reliably", not on a lucky draw of the load
    ratio = max(ratios) if len(ratios) == args.repeat else None
    all_answered = all(r["answered"] == r["sessions"] for r in rounds)
    gaps_ok = all(
        r["max_step_gap_s"] is not None and r["max_step_gap_s"] <= GOAL_GAP_S for r in rounds
    )
    met = all_answered and ratio is not None and ratio <= GOAL_RATIO and gaps_ok
    goal = (
        f"p50 at {args.sessions[-1]} ≤ {GOAL_RATIO:g}× p50 at {args.sessions[0]} in every "
        f"repetition; no step gap > {GOAL_GAP_S:g} s"
    )
    figures = {"rounds": rounds, "p50_ratios": ratios, "p50_ratio": ratio}
    print(json.dumps(figures | {"goal": goal, "met": met}))


def _load_avg() -> float:
    """The host's 1-minute load average at the end of a round (others' jobs included)."""
    return round(os.getloadavg()[0], 1)


if __name__ == "__main__":
    main()
