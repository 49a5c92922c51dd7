"""The image in real containers: called by .ci/image where this machine starts containers.

    .venv/bin/python .ci/containers.py --image IMAGE -- podman … run [options that start one]

Everything after ``--`` is the command that starts a container here, up to and including
``run`` and the options the capability check needed (``.ci/image``: the rlimits podman
asks for must be within this process's hard limits). What runs:

1. The fake Slack Web API and the fake Messages API, in this process on 127.0.0.1; a
   scratch PostgreSQL database; a scratch Redis database (left as found: the keys made
   are deleted, ``bot.drill.redis_keys``).
2. ``warroom migrate`` in a container, then a ``serve`` container (HTTP mode) and two
   ``worker`` containers (``worker-a``, ``worker-b``: two hosts), all on the host's
   network (the fakes, PostgreSQL and Redis are on its loopback). The workers start local
   sandboxes: bubblewrap jails inside the container, which needs
   ``--security-opt seccomp=unconfined`` (the default profile refuses ``sethostname`` in
   the jail's own UTS namespace: "Can't set hostname to sandbox") and
   ``--security-opt systempaths=unconfined`` (Docker's spelling, which podman takes too:
   the kernel lets a new user namespace mount a proc only where no part of the visible
   one is masked, "Can't mount proc on /newroot/proc"; podman's narrower
   ``unmask=/proc/*`` is enough as well). No capability is added and the container is
   not privileged: what the README tells ``docker run`` and ``compose.yaml`` give.
3. A signed ``app_mention`` to ``serve``. The scripted model asks for one Bash command
   that sleeps, then appends a line to a file in ``/workspace``; while it runs, the worker
   container holding the session gets ``podman stop`` (SIGTERM to tini, which passes it
   to the Dramatiq parent).
4. Checks: the stopped container exits 0 after the command finished; its tool result is
   committed once; it made no model call after the signal (the next step went to the
   other worker's container); the thread gets its answer exactly once; ``serve`` exits 0
   on SIGTERM.

Exit status 0 when every check passed, 1 otherwise (the containers' logs are printed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from bot.drill.channel import IncidentChannel, Person
from bot.drill.narrator import ANSWER_METHODS, post_key
from bot.drill.redis_keys import RedisBefore
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.fakes.slack_api import TEAM_ID, FakeSlackApi
from memory_store import Database, Event, Session, SessionKey, SessionStore

T = TypeVar("T")

CHANNEL = "C0CONTAINER"
MARKER = "[ci:containers]"
PERSON = Person("U0FAKEALICE", "alice", f"{MARKER} is the image fine? run the check")
COMMAND_S = 8
"""How long the Bash command sleeps: ``podman stop`` lands while it runs."""
EFFECT = f"sleep {COMMAND_S}; echo ran >> /workspace/effects.log; cat /workspace/effects.log"
ANSWER = "The containers are fine: the check ran once."
JAILS = [
    "--security-opt", "seccomp=unconfined", "--security-opt", "systempaths=unconfined"
]  # fmt: skip
"""What a local sandbox (bubblewrap) needs of its container: see the module docstring."""
WORKER = ("warroom", "worker", "--processes", "1", "--threads", "2")
READY_LINE = "Worker process is ready for action."
STOP_GRACE_S = 120
"""``podman stop -t``: the stopped worker's time to finish its step before SIGKILL."""
WAIT_S = 90.0
POLL_S = 0.1


def model(request: RecordedRequest) -> Reply:
    """The scripted model: this step's session runs one Bash command, then answers; any
    other request gets a short text."""
    messages = request.messages
    if not messages or MARKER not in json.dumps(messages[0]):
        return Reply.text("Nothing to do.")
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    if turn == 0:
        return Reply.tool("Bash", {"command": EFFECT, "description": "the containers' check"})
    return Reply.text(ANSWER)


async def poll(check: Callable[[], Awaitable[T | None]], *, what: str, timeout_s: float) -> T:
    """``check()``'s first value that is not None or False.

    Raises:
        TimeoutError: none within ``timeout_s`` (``what`` names the wait).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if found := await check():
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(POLL_S)


@dataclass
class Containers:
    """The containers this run started, by name; all removed by ``remove_all``."""

    podman_run: Sequence[str]
    image: str
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    names: list[str] = field(default_factory=list)

    @property
    def podman(self) -> list[str]:
        """The podman command with its global options (what comes before ``run``)."""
        return list(self.podman_run[: list(self.podman_run).index("run")])

    def start(self, role: str, env: dict[str, str], *args: str, options: Sequence[str] = ()) -> str:
        """Start a detached container ``warroom-ci-<role>-<tag>`` of the image; its name.

        Raises:
            subprocess.CalledProcessError: podman could not start it.
        """
        name = f"warroom-ci-{role}-{self.tag}"
        env_args = [a for k, v in env.items() for a in ("--env", f"{k}={v}")]
        argv = [*self.podman_run, "-d", "--name", name, "--network", "host", "--hostname", name]
        self.names.append(name)
        subprocess.run(
            [*argv, *options, *env_args, self.image, *args], check=True, stdout=subprocess.DEVNULL
        )
        return name

    def once(self, env: dict[str, str], *args: str) -> None:
        """Run the image's ``args`` to the end in a container removed after.

        Raises:
            subprocess.CalledProcessError: it exited non-zero.
        """
        env_args = [a for k, v in env.items() for a in ("--env", f"{k}={v}")]
        argv = [*self.podman_run, "--rm", "--network", "host", *env_args, self.image, *args]
        subprocess.run(argv, check=True)

    def logs(self, name: str) -> str:
        """What the container printed so far (stdout and stderr)."""
        done = subprocess.run(
            [*self.podman, "logs", name], capture_output=True, text=True, check=False
        )
        return done.stdout + done.stderr

    def running(self, name: str) -> bool:
        """Whether the container runs."""
        return self._state(name, "{{.State.Running}}") == "true"

    def exit_code(self, name: str) -> int:
        """The exited container's exit status."""
        return int(self._state(name, "{{.State.ExitCode}}"))

    def stop(self, name: str) -> None:
        """SIGTERM to the container's PID 1 (tini); returns once it exited (SIGKILL after
        ``STOP_GRACE_S``)."""
        subprocess.run(
            [*self.podman, "stop", "-t", str(STOP_GRACE_S), name],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def remove_all(self) -> None:
        """Remove every container started (and its anonymous /data volume)."""
        if self.names:
            subprocess.run(
                [*self.podman, "rm", "-f", "-v", "-t", "0", *self.names],
                check=False,
                capture_output=True,
            )

    def _state(self, name: str, template: str) -> str:
        done = subprocess.run(
            [*self.podman, "inspect", "--format", template, name],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()


@contextlib.asynccontextmanager
async def scratch_database(admin_url: str) -> AsyncIterator[str]:
    """A new PostgreSQL database ``warroom_ci_containers_<hex>``; its URL; dropped after."""
    name = f"warroom_ci_containers_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
    finally:
        admin = await asyncpg.connect(admin_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def of_kind(events: list[Event], kind: str) -> list[Event]:
    """The events of ``kind``, in order."""
    return [e for e in events if e.kind == kind]


def model_calls(log: str, session_id: str) -> int:
    """How many Messages API calls a worker's log shows for ``session_id``."""
    return sum(
        1
        for line in log.splitlines()
        if "/v1/messages" in line and f"session={session_id} " in line
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Failed(Exception):
    """A check failed (the message says which)."""


def check(ok: bool, what: str) -> None:
    """Print ``what`` as passed, or raise ``Failed``."""
    if not ok:
        raise Failed(what)
    print(f"  ✓ {what}", flush=True)


async def run(args: argparse.Namespace) -> None:
    """Steps 1–4 of the module docstring.

    Raises:
        Failed: a check failed.
        TimeoutError: a wait ran out.
        subprocess.CalledProcessError: podman refused a command.
    """
    started = time.monotonic()
    containers = Containers(args.podman_run, args.image)
    slack = FakeSlackApi()
    await slack.start()
    slack.add_user(PERSON.user_id, PERSON.name)
    redis_before = await RedisBefore.take(args.redis_url)
    try:
        async with (
            FakeAnthropicAPI(model) as fake_model,
            scratch_database(args.postgres_admin_url) as database_url,
        ):
            try:
                await play(args, containers, slack, fake_model, database_url, started)
            except BaseException:
                for name in containers.names:
                    print(f"--- {name}:\n{containers.logs(name)[-4000:]}", flush=True)
                raise
            finally:  # before the database goes
                containers.remove_all()
    finally:
        await slack.stop()
        await redis_before.restore()


async def play(
    args: argparse.Namespace,
    containers: Containers,
    slack: FakeSlackApi,
    fake_model: FakeAnthropicAPI,
    database_url: str,
    started: float,
) -> None:
    """Start the containers, deliver the event, stop the busy worker, check (see ``run``)."""
    secret = secrets.token_hex(16)
    port = free_port()
    env = {
        "DATABASE_URL": database_url,
        "REDIS_URL": args.redis_url,
        "SLACK_BOT_TOKEN": slack.token,
        "SLACK_API_URL": slack.base_url,
        "SLACK_SIGNING_SECRET": secret,
        "ANTHROPIC_API_KEY": "fake-key",
        "ANTHROPIC_BASE_URL": fake_model.base_url,
        # a stopping worker hands its session back at once; the other host takes it
        "WARROOM_LEASE_S": "3",
        "WARROOM_HOST_BEAT_S": "0.5",
        "WARROOM_HOST_DEAD_AFTER_S": "3",
    }
    containers.once(env, "warroom", "migrate")
    serve = containers.start(
        "serve", env | {"WARROOM_SLACK_MODE": "http", "SLACK_HTTP_PORT": str(port)}
    )
    workers = {
        role: containers.start(
            role,
            env | {"WARROOM_HOST_ID": f"{role}-{containers.tag}"},
            *WORKER,
            options=JAILS,
        )
        for role in ("worker-a", "worker-b")
    }
    print(f"  started {serve} and {', '.join(workers.values())}", flush=True)

    async def ready() -> bool:
        for name in [serve, *workers.values()]:
            if not containers.running(name):
                raise Failed(f"{name} exited:\n{containers.logs(name)[-3000:]}")
        if not all(READY_LINE in containers.logs(w) for w in workers.values()):
            return False
        try:
            async with httpx.AsyncClient(timeout=2.0) as http:
                return (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
        except httpx.HTTPError:
            return False

    await poll(ready, what="serve and the workers to be ready", timeout_s=WAIT_S)
    check(True, f"serve and two workers up in containers ({time.monotonic() - started:.0f} s)")

    db = Database.from_url(database_url, data_dir=Path(tempfile.gettempdir()))
    sessions = SessionStore(db)
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            channel = IncidentChannel(
                http=http,
                url=f"http://127.0.0.1:{port}/slack/events",
                secret=secret,
                slack=slack,
                org_id=TEAM_ID,
                channel_id=CHANNEL,
            )
            thread_ts = await channel.mention(PERSON)
        await stop_mid_step(containers, workers, sessions, slack, thread_ts)
    finally:
        await db.dispose()

    containers.stop(serve)
    check(containers.exit_code(serve) == 0, "serve exited 0 on SIGTERM")
    print(f"  containers step: {time.monotonic() - started:.0f} s", flush=True)


async def stop_mid_step(
    containers: Containers,
    workers: dict[str, str],
    sessions: SessionStore,
    slack: FakeSlackApi,
    thread_ts: str,
) -> None:
    """Stop the worker container running the session's Bash command; check the step and
    the answer (step 3 and 4 of the module docstring)."""
    key = SessionKey(TEAM_ID, CHANNEL, thread_ts)

    async def opened() -> Session | None:
        return await sessions.find(key)

    session = await poll(opened, what="the event to open a session", timeout_s=WAIT_S)

    async def intent() -> list[Event]:
        return of_kind(await sessions.events(session.id), "tool_intent")

    await poll(intent, what="the Bash command to start", timeout_s=WAIT_S)
    held = await sessions.get(session.id)
    owner = (held.lease_owner or "") if held else ""
    host = owner.partition(":")[0].partition("@")[0]  # <host>@<PID namespace>:<pid>:…
    busy = next((n for n in workers.values() if host == n), None)
    check(busy is not None, f"a worker container holds the step ({owner})")
    assert busy is not None
    other = next(n for n in workers.values() if n != busy)
    calls_before = model_calls(containers.logs(busy), session.id)

    signalled = time.monotonic()
    containers.stop(busy)  # returns once the container exited
    took = time.monotonic() - signalled
    code = containers.exit_code(busy)
    check(code == 0, f"{busy} exited {code} on SIGTERM, {took:.1f} s after it")
    results = of_kind(await sessions.events(session.id), "tool_result")
    outputs = [str(json.loads(e.payload_json).get("output_head", "")) for e in results]
    check(
        len(results) == 1 and outputs[0].strip() == "ran",
        f"its step was committed once before it exited: tool result {outputs}",
    )
    calls_after = model_calls(containers.logs(busy), session.id)
    check(calls_after == calls_before, "the stopped worker made no model call after the signal")

    async def answered() -> list[str]:
        return [
            post_key(c.args)
            for c in list(slack.calls)
            if c.method in ANSWER_METHODS
            and c.response.get("ok")
            and ":answer:" in post_key(c.args)
            and post_key(c.args).startswith(f"{session.id}:")
        ]

    posts = await poll(answered, what="the thread's answer", timeout_s=WAIT_S)
    in_thread = [m for m in slack.thread(CHANNEL, thread_ts) if ANSWER in json.dumps(m)]
    check(
        len(posts) == 1 and len(in_thread) == 1,
        f"the thread got its answer once ({len(posts)} answer post(s))",
    )
    check(
        model_calls(containers.logs(other), session.id) > 0, f"{other} made the answer's model call"
    )
    after = of_kind(await sessions.events(session.id), "tool_result")
    check(len(after) == 1, "the command ran once in all")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run, report; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--image", required=True)
    parser.add_argument(
        "--postgres-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/7")
    parser.add_argument("podman_run", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.podman_run[:1] == ["--"]:
        args.podman_run = args.podman_run[1:]
    if "run" not in args.podman_run:
        parser.error("give the command that starts a container after --, up to `run`")
    try:
        asyncio.run(run(args))
    except (Failed, TimeoutError, subprocess.CalledProcessError) as exc:
        print(f"  ✗ {exc}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
