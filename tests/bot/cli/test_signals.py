"""SIGTERM and SIGINT take one clean-up path in ``chat`` and the drill, and the processes
they start die with them (issue #12, item 6)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI, Reply
from sandbox_client import LocalConfig, LocalProvider
from tests.bot.cli_support import Output, finish, start, warroom_env

LONG_BASH = Reply.tool("Bash", {"command": "sleep 120", "description": "wait a long time"})


def live_jails(state_dir: Path) -> list[str]:
    """Names of the sandboxes under ``state_dir`` whose jail still runs."""
    if not state_dir.exists():
        return []
    provider = LocalProvider(LocalConfig(state_dir=state_dir))
    names = [d.name for d in state_dir.iterdir() if d.name.startswith("sbx-")]
    return [name for name in names if provider.find(name) is not None]


async def wait_for(predicate: object, *, timeout_s: float, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)  # polling a condition with a deadline


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
async def test_a_stop_signal_to_chat_cancels_the_turn_destroys_its_sandbox_and_exits_128_plus_it(
    tmp_path: Path, signum: int, code: int
) -> None:
    async with FakeAnthropicAPI([LONG_BASH], api_key="fake-key") as fake:
        env = warroom_env(
            tmp_path / "data", ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url
        )
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)
        # Given a chat whose agent runs a long command in its sandbox
        chat.stdin.write(b"the site is down\n")
        await chat.stdin.drain()
        state_dir = tmp_path / "data" / "sbx"
        database = tmp_path / "data" / "warroom.sqlite3"
        await wait_for(lambda: _intents(database), timeout_s=60, what="the command to start")
        await wait_for(lambda: live_jails(state_dir), timeout_s=60, what="the sandbox")

        # When the chat gets the stop signal
        chat.send_signal(signum)
        exit_code = await finish(chat, timeout_s=60)
        rest = await chat.stdout.read()

    # Then it cleaned up and says so: the turn cancelled, no jail left running
    assert exit_code == code
    assert "Stopped: the turn in progress was cancelled." in out.text + rest.decode()
    assert live_jails(state_dir) == []


def _intents(database: Path) -> int:
    """How many tool calls were committed as started, in the chat's SQLite database."""
    if not database.exists():
        return 0
    with contextlib.closing(sqlite3.connect(database, timeout=5)) as conn:
        try:
            row = conn.execute("SELECT count(*) FROM session_events WHERE kind = 'tool_intent'")
        except sqlite3.OperationalError:  # not migrated yet
            return 0
        return int(row.fetchone()[0])


def test_a_child_started_to_die_with_its_parent_ends_when_the_parent_is_killed(
    tmp_path: Path,
) -> None:
    # Given a parent process that started a long-lived child with ``die_with_parent``
    program = (
        "import subprocess, sys, time\n"
        "from bot.cli.signals import die_with_parent\n"
        "child = subprocess.Popen(['sleep', '120'], preexec_fn=die_with_parent)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, cwd=Path.cwd(), text=True
    ) as parent:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())

        # When the parent is SIGKILLed (no clean-up of its own can run)
        parent.kill()
        parent.wait(10)

    # Then the child ends too, instead of living on under init
    deadline = time.monotonic() + 10
    while _alive(child_pid):
        assert time.monotonic() < deadline, "the child outlived its killed parent"
        time.sleep(0.05)  # polling the child's state with a deadline


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped by init soon, counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _drill_dirs(parent: Path) -> list[Path]:
    return list(parent.glob("wr-drill-*"))


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = {int(p) for p in (task / "children").read_text().split()}
        except OSError:
            continue
        for child in children:
            found |= {child, *_descendants(child)}
    return found


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.redis
async def test_sigterm_to_the_full_drill_stops_its_workers_and_removes_its_directory(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    # Given the full drill running, with its worker processes up (TMPDIR: its directory)
    env = warroom_env(tmp_path / "unused", TMPDIR=str(tmp_path))
    drill = await start(
        "drill", "--database-url", postgres_url, "--redis-url", redis_url, env=env, cwd=tmp_path
    )
    assert drill.stdout is not None
    out = Output(drill.stdout)
    await out.until(lambda text: "workers: 2 `dramatiq" in text, timeout_s=120)
    workers = _descendants(drill.pid)
    assert _drill_dirs(tmp_path)

    # When it gets SIGTERM
    drill.send_signal(signal.SIGTERM)
    code = await finish(drill, timeout_s=90)

    # Then it exits 143 having stopped every worker and removed its directory
    assert code == 143
    assert [pid for pid in workers if _alive(pid)] == []
    assert _drill_dirs(tmp_path) == []
