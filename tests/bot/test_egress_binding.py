"""An approval lets out the approved command's own requests, and no other process's (§13).

Everything is real: a worker's gateway built from its settings, a bubblewrap jail, an HTTPS
upstream with its own CA on loopback, the session's checkpoint in the database that the
gateway's approval check reads. A process planted by an earlier, unapproved call waits in the
jail for the approved call and tries what an attacker would: its own proxy variables, none,
the approved call's id without its credential or with a guessed one, the approved process's
environment, memory, open files and ``ptrace`` (also from a user namespace of its own), the
approved call's output through the sandbox's API, a credential replayed after its call ended.
Only the approved ``curl``'s request reaches the upstream.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import ssl
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import SecretStr

from bot.durable.wiring import make_provider
from bot.egress import WorkerEgress
from bot.metrics import Metrics
from bot.settings import Settings
from harness import (
    ApprovalStatus,
    Checkpoint,
    EgressReach,
    Message,
    PendingApproval,
    Requester,
    SandboxWorkspaces,
    SessionWorkspace,
    ToolUseBlock,
    Verdict,
    default_policy,
    input_sha256,
)
from memory_store import Claim, Database, EgressEntry, EgressLog, SessionKey, SessionStore
from sandbox_client import SandboxManager
from sandbox_client.gateway import CertificateAuthority
from tests.conftest import require_bwrap

HOST = "127.0.0.2"  # inside a jail 127.0.0.1 and localhost are not proxied
SECRET = "svc-token-31c9aa70e4"
SESSION = "s-bind"
APPROVED = "toolu_approved"
PLANTER = "toolu_plant"


@dataclass
class Upstream:
    """An HTTPS (credential rule) and an HTTP (write rule, no credential) echo server."""

    tls_port: int = 0
    plain_port: int = 0
    ca_file: Path | None = None
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, auth


@dataclass
class Scene:
    upstream: Upstream
    workspace: SessionWorkspace
    db: Database
    sessions: SessionStore
    egress_port: int
    token: str
    egress: WorkerEgress

    async def run(self, name: str, command: str) -> str:
        result = await self.workspace.exec(name, command, timeout_s=60)
        assert result.exit_code == 0, result.stdout + result.stderr
        return result.stdout

    async def audit(self) -> list[EgressEntry]:
        return await EgressLog(self.db).recent(SESSION, limit=100)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="wr-bd-"))  # jail socket paths stay under 108 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def upstream(data_dir: Path) -> AsyncIterator[Upstream]:
    up = Upstream()
    authority = CertificateAuthority.create("upstream test CA")

    async def echo(request: web.Request) -> web.Response:
        up.seen.append((request.method, request.path, request.headers.get("Authorization", "")))
        return web.Response(text=f"done {request.method} {request.path}\n")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    context: ssl.SSLContext = authority.server_context(HOST)
    tls, plain = web.TCPSite(runner, HOST, 0, ssl_context=context), web.TCPSite(runner, HOST, 0)
    await tls.start()
    await plain.start()
    up.tls_port = tls._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    up.plain_port = plain._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    up.ca_file = data_dir / "upstream-ca.pem"
    up.ca_file.write_bytes(authority.cert_pem())
    yield up
    await runner.cleanup()


def _approved_in_flight(*, in_flight: str | None) -> Checkpoint:
    """The session as the harness commits it while the approved call runs (§13)."""
    now = datetime.now(UTC)
    call = {"command": "curl -X DELETE …", "description": "Delete the item"}
    approval = PendingApproval(
        APPROVED, "Bash", input_sha256("Bash", call), call["command"], "r", now,
        now + timedelta(hours=1),
    ).decided(ApprovalStatus.APPROVED, "U2", now)  # fmt: skip
    message = Message("assistant", (ToolUseBlock(APPROVED, "Bash", call),))
    cp = Checkpoint(SESSION, "T1", "C1", Requester("U1"), messages=(message,))
    return replace(cp, approval=approval, in_flight=in_flight)


@pytest.fixture
async def scene(
    data_dir: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Scene]:
    require_bwrap()
    monkeypatch.setenv("SVC_TOKEN", SECRET)
    rules = data_dir / "egress.yml"
    rules.write_text(
        "rules:\n"
        f"  - name: svc\n    hosts: [{HOST}]\n    ports: [{upstream.tls_port}]\n"
        "    methods: [GET, DELETE]\n    inject: {type: bearer, token: {env: SVC_TOKEN}}\n"
        f"  - name: hook\n    hosts: [{HOST}]\n    ports: [{upstream.plain_port}]\n"
        "    methods: [GET, POST]\n"
    )
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
        data_dir=data_dir,
        egress_rules=rules,
        egress_upstream_ca=upstream.ca_file,
        anthropic_api_key=SecretStr("sk-ant-test"),
    )
    db = Database.from_url(None, data_dir=data_dir)
    await db.migrate()
    sessions = SessionStore(db)
    cp = _approved_in_flight(in_flight=APPROVED)
    opened = await sessions.open_or_join(
        SessionKey("T1", "C1", SESSION), requester_id="U1", initial_checkpoint=cp.state_json(),
        text="go", source_ts="1.0", session_id=SESSION,
    )  # fmt: skip
    assert opened.token is not None
    egress = await WorkerEgress.open(settings, db, Metrics())
    assert egress is not None
    provider = make_provider(settings)
    manager = SandboxManager(provider)
    try:
        workspace = SandboxWorkspaces(manager, (), egress).open(cp)
        port = settings.egress_port
        yield Scene(upstream, workspace, db, sessions, port, opened.token, egress)
    finally:
        await manager.aclose()
        await provider.destroy_all()  # type: ignore[attr-defined]  # the local provider
        await egress.aclose()
        await db.dispose()


# The planted process: started by an unapproved call, it waits for the approved one, then
# tries every way out it has, and says what each got (the curl status of the DELETE, or the
# CONNECT's when the tunnel was refused).
PLANT = r"""
cd /workspace
until [ -e approved-running ]; do sleep 0.02; done
status() { curl -s -o /dev/null -w '%{http_code}/%{http_connect}' "$@"; }
{
  echo "own: $(status -X DELETE "$URL/own")"
  echo "session: $(status --proxy "http://127.0.0.1:$PORT" -X DELETE "$URL/session")"
  echo "claimed: $(status --proxy "http://$APPROVED:x@127.0.0.1:$PORT" -X DELETE "$URL/claimed")"
  guess=$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | head -c 43)
  echo "guessed: $(status --proxy "http://$APPROVED:$guess@127.0.0.1:$PORT" -X DELETE "$URL/g")"
  python3 /workspace/steal.py
  stolen=$(cat stolen 2>/dev/null)
  [ -z "$stolen" ] || echo "with-stolen: $(status --proxy "$stolen" -X DELETE "$URL/stolen")"
} > planted.log 2>&1
touch planted-done
"""

# What it tries on the approved process: environment, memory, open files, ptrace.
STEAL = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
found, tried = "", []
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if b"touch /workspace/approved-running" not in cmdline:
        continue
    for what, attempt in (
        ("environ", lambda: open(f"/proc/{pid}/environ", "rb").read()),
        ("mem", lambda: open(f"/proc/{pid}/mem", "rb").read(1)),
        ("fd", lambda: [open(f"/proc/{pid}/fd/{n}", "rb") for n in ("0", "1", "2")]),
    ):
        try:
            data = attempt()
            tried.append(f"{what}=read")
            if what == "environ":
                for entry in data.split(b"\0"):
                    if entry.startswith(b"HTTPS_PROXY=http://toolu_approved:"):
                        found = entry.split(b"=", 1)[1].decode()
        except OSError as exc:
            tried.append(f"{what}={exc.errno}")
    attached = libc.ptrace(16, int(pid), None, None)  # PTRACE_ATTACH
    tried.append(f"ptrace={0 if attached == 0 else ctypes.get_errno()}")
    if libc.unshare(0x10000000) == 0:  # CLONE_NEWUSER: every capability, in a new namespace
        try:
            open(f"/proc/{pid}/environ", "rb").read()
            tried.append("userns-environ=read")
        except OSError as exc:
            tried.append(f"userns-environ={exc.errno}")
    else:
        tried.append(f"userns={ctypes.get_errno()}")
print("tried:", " ".join(tried) or "nothing found")
print("stolen:", found or "none")
if found:
    open("/workspace/stolen", "w").write(found)
"""


async def _audit_once_it_has(
    scene: Scene, key: tuple[str, str], timeout_s: float = 30.0
) -> dict[tuple[str, str], tuple[str | None, int, str]]:
    """The audit as ``(path, method) -> (tool_use_id, status, outcome)``, read again until it
    holds ``key`` (its rows are written after the answer) or ``timeout_s`` passed."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        audit = {
            (e.path, e.method): (e.tool_use_id, e.status, e.outcome) for e in await scene.audit()
        }
        if key in audit or asyncio.get_running_loop().time() > deadline:
            return audit
        await asyncio.sleep(0.05)  # polling the database for a row, with a deadline


async def test_a_planted_process_gets_403s_while_the_approved_curl_deletes(scene: Scene) -> None:
    url = f"https://{HOST}:{scene.upstream.tls_port}/items"
    await scene.workspace.write_file("/workspace/steal.py", STEAL.encode())
    # Given a background process an earlier, unapproved call started
    variables = f"URL={url} PORT={scene.egress_port} APPROVED={APPROVED}"
    await scene.workspace.start(PLANTER, f"{variables} bash -c {shlex.quote(PLANT)}")
    # When the approved call runs: it waits for the planted process's attempts, then deletes
    approved = (
        "touch /workspace/approved-running; i=0; "
        "until [ -e /workspace/planted-done ] || [ $i -ge 1500 ]; do sleep 0.02; i=$((i+1)); done; "
        f"curl -sS --fail-with-body -X DELETE {url}/approved"
    )
    out = await scene.run(APPROVED, approved)
    log = await scene.run("toolu_look", "cat /workspace/planted.log")
    # Then the approved curl's DELETE went out with the credential added outside
    assert "done DELETE /items/approved" in out
    assert scene.upstream.seen == [("DELETE", "/items/approved", f"Bearer {SECRET}")]
    # And every planted attempt was refused while the approved call ran: 403 from no call or
    # its own call, 407 for a credential not the approved call's; nothing could be read
    assert "own: 403/" in log, log
    assert "session: 403/" in log, log
    assert "claimed: 000/407" in log, log
    assert "guessed: 000/407" in log, log
    for way_in in ("environ", "mem", "fd"):  # EACCES, whatever the program
        assert f"{way_in}=13" in log, log
    assert "ptrace=1" in log, log  # EPERM
    assert "userns-environ=13" in log or "userns=" in log, log  # refused, or no nested userns
    assert "stolen: none" in log, log
    # And the audit says who did what: the planted process under its own call or none (the
    # gateway writes its audit rows after answering: wait for the last refused CONNECT's)
    audit = await _audit_once_it_has(scene, ("", "CONNECT"))
    assert audit[("/items/approved", "DELETE")] == (APPROVED, 200, "injected")
    assert audit[("/items/own", "DELETE")] == (PLANTER, 403, "blocked")
    assert audit[("/items/session", "DELETE")] == (None, 403, "blocked")
    assert audit[("", "CONNECT")][1] == 407  # the claimed and guessed ones: no call named


async def test_a_write_rule_without_a_credential_still_needs_the_approved_call(
    scene: Scene,
) -> None:
    url = f"http://{HOST}:{scene.upstream.plain_port}/hooks/deploy"
    # When an unapproved call POSTs through a rule that allows POST and adds no credential
    refused = await scene.run("toolu_plain", f"curl -sS -X POST {url}")
    # And the approved call does the same
    passed = await scene.run(APPROVED, f"curl -sS --fail-with-body -X POST {url}")
    # Then only the approved call's POST reached the service
    assert "outside an approved call" in refused
    assert "done POST /hooks/deploy" in passed
    assert scene.upstream.seen == [("POST", "/hooks/deploy", "")]
    entries = [(e.tool_use_id, e.status) for e in await scene.audit()]
    assert entries == [("toolu_plain", 403), (APPROVED, 200)]


async def test_the_approved_calls_credential_is_worthless_once_the_call_ended(
    scene: Scene,
) -> None:
    url = f"https://{HOST}:{scene.upstream.tls_port}/items"
    # Given the approved command leaked its own proxy URL into the workspace
    await scene.run(APPROVED, 'printf %s "$HTTPS_PROXY" > /workspace/leaked')
    # When the call has ended (its result committed: nothing is in flight)
    claim = await _claim(scene)
    ended = _approved_in_flight(in_flight=None).state_json()
    await scene.sessions.save(claim, checkpoint=ended)
    # And a later process replays the leaked credential
    out = await scene.run(
        "toolu_later",
        f'curl -sS --proxy "$(cat /workspace/leaked)" -X DELETE {url}/replayed',
    )
    # Then it is refused, attributed to the call whose credential it replayed
    assert "outside an approved call" in out
    assert scene.upstream.seen == []
    (entry,) = [e for e in await scene.audit() if e.method == "DELETE"]
    assert (entry.tool_use_id, entry.status) == (APPROVED, 403)


async def _claim(scene: Scene) -> Claim:
    claim = await scene.sessions.claim(SESSION, scene.token, worker_id="w-test", lease_s=60)
    assert claim is not None
    return claim


# A planted process that reads the approved call's output through the sandbox's own API (the
# server's socket is in the jail), hoping for ``curl -v``'s ``Proxy-Authorization`` line.
READ_LOGS = r"""
cd /workspace
until [ -e approved-running ]; do sleep 0.02; done
curl -s --unix-socket /run/warroom/sbx.sock "http://sbx/process/$APPROVED/logs" > logs.json
echo "api: $(curl -s -o /dev/null -w '%{http_code}' --unix-socket /run/warroom/sbx.sock http://sbx/health)"
basic=$(grep -o 'Proxy-Authorization: Basic [A-Za-z0-9+/=]*' logs.json | head -1 | cut -d' ' -f3)
if [ -n "$basic" ]; then
  stolen="http://$(printf %s "$basic" | base64 -d)@127.0.0.1:$PORT"
  echo "with-logs: $(curl -s -o /dev/null -w '%{http_code}' --proxy "$stolen" -X DELETE "$URL/l")"
fi
touch planted-done
"""


async def test_the_sandbox_api_is_not_served_to_the_jails_own_processes(scene: Scene) -> None:
    url = f"https://{HOST}:{scene.upstream.tls_port}/items"
    # Given a planted process that waits for the approved call and reads its output
    variables = f"URL={url} PORT={scene.egress_port} APPROVED={APPROVED}"
    await scene.workspace.start(
        PLANTER, f"{variables} bash -c {shlex.quote(READ_LOGS)} > /workspace/planted.log 2>&1"
    )
    # When the approved call runs curl -v, which prints the proxy credential it sends
    approved = (
        "touch /workspace/approved-running; "
        f"curl -sS -v -o /dev/null {url}/probe; i=0; "
        "until [ -e /workspace/planted-done ] || [ $i -ge 1500 ]; do sleep 0.02; i=$((i+1)); done"
    )
    await scene.run(APPROVED, approved)
    log = await scene.run("toolu_look", "cat /workspace/planted.log")
    # Then the planted process could not use the sandbox's API, so got nothing to replay
    assert "api: 000" in log or "api: 403" in log, log  # no socket in the jail, or refused
    assert "with-logs" not in log, log
    assert [m for m, _, _ in scene.upstream.seen] == ["GET"]


async def test_the_policy_asks_approval_for_a_change_through_a_write_rule(scene: Scene) -> None:
    # Given the worker's egress, as the approval gate is given it (bot.durable.wiring)
    egress = scene.egress
    policy = default_policy()
    reach = EgressReach(egress.gateway.rules)  # as bot.durable.wiring gives the gate
    hook = f"http://{HOST}:{scene.upstream.plain_port}/hooks/deploy"
    svc = f"https://{HOST}:{scene.upstream.tls_port}/items/1"
    # When commands reach the write rule without a credential, and the credential rule
    decisions = {
        command: policy.bash(command, reach=reach).verdict
        for command in (
            f"curl -X POST {hook}",
            f"curl {hook}",
            f"curl -X DELETE {svc}",
        )
    }
    # Then a change through either needs approval, a read does not
    assert list(decisions.values()) == [Verdict.APPROVAL, Verdict.ALLOWED, Verdict.APPROVAL]


# Red team, promise 1: what a planted process tries after the fixes, beyond the ways above:
# every process's environment (the approved curl's own included), the server's memory
# (which holds every command's output), process_vm_readv and
# pidfd_getfd on the approved process, taking the proxy port, switching calls on a kept-alive
# connection, the gateway's socket directly, two Proxy-Authorization headers, its own
# credential under the approved call's name.
PROBE = r"""
import base64, ctypes, os, socket, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
port, host, plain, approved = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
out = []
while not os.path.exists("/workspace/approved-running"):
    time.sleep(0.02)
own = os.environ["HTTP_PROXY"].split("//", 1)[1].split("@", 1)[0]
def basic(user_password):
    return "Basic " + base64.b64encode(user_password.encode()).decode()
def status(reply):
    return reply.split(b" ", 2)[1].decode() if reply.startswith(b"HTTP/") else "none"
def send(raw, path=None):
    s = socket.socket(socket.AF_UNIX) if path else socket.create_connection(("127.0.0.1", port))
    if path:
        s.connect(path)
    s.sendall(raw)
    s.settimeout(10)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    s.close()
    return data
def post(name, auth):
    head = f"POST http://{host}:{plain}/hooks/{name} HTTP/1.1\r\nHost: {host}\r\n"
    head += "Content-Length: 0\r\n"
    return head + "".join(f"Proxy-Authorization: {a}\r\n" for a in auth)
readable = 0
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        if f"{approved}:".encode() in open(f"/proc/{pid}/environ", "rb").read():
            readable += 1
    except OSError:
        pass
out.append(f"environs-with-approved={readable}")
for what in ("environ", "mem"):  # the sandbox's server keeps every command's output
    try:
        open(f"/proc/2/{what}", "rb").read(1)
        out.append(f"server-{what}=read")
    except OSError as exc:
        out.append(f"server-{what}={exc.errno}")
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if b"touch /workspace/approved-running" in cmd:
        buf = ctypes.create_string_buffer(64)
        local = struct.pack("PN", ctypes.addressof(buf), 64)
        remote = struct.pack("PN", 0x400000, 64)
        n = libc.process_vm_readv(int(pid), local, 1, remote, 1, 0)
        out.append(f"vm_readv={0 if n >= 0 else ctypes.get_errno()}")
        pidfd = libc.syscall(434, int(pid), 0)  # pidfd_open
        got = libc.syscall(438, pidfd, 1, 0) if pidfd >= 0 else -1  # pidfd_getfd
        out.append(f"getfd={0 if got >= 0 else ctypes.get_errno()}")
        break
try:
    socket.socket().bind(("127.0.0.1", port))
    out.append("port=taken")
except OSError as exc:
    out.append(f"port={exc.errno}")
first = f"GET http://{host}:{plain}/hooks/read HTTP/1.1\r\nHost: {host}\r\n"
first += f"Proxy-Authorization: {basic(own)}\r\n\r\n"
second = post("switched", [basic(approved + ":" + "A" * 43)]) + "Connection: close\r\n\r\n"
replies = send((first + second).encode())
lines = [r for r in replies.split(b"\r\n") if r.startswith(b"HTTP/1.1 ")]
out.append("keepalive=" + ",".join(r.split(b" ", 2)[1].decode() for r in lines))
direct = (post("direct", []) + "Connection: close\r\n\r\n").encode()
out.append("socket=" + status(send(direct, "/run/warroom/egress.sock")))
mine_as_approved = basic(approved + ":" + own.split(":")[1])
out.append("two=" + status(send((post("two", [basic(own), mine_as_approved]) + "\r\n").encode())))
out.append("renamed=" + status(send((post("renamed", [mine_as_approved]) + "\r\n").encode())))
print(" ".join(out))
open("/workspace/planted-done", "w").close()
"""


async def test_red_team_a_planted_process_finds_no_way_to_the_approved_calls_pass(
    scene: Scene,
) -> None:
    up = scene.upstream
    await scene.workspace.write_file("/workspace/probe.py", PROBE.encode())
    # Given a process an earlier, unapproved call left running
    args = f"{scene.egress_port} {HOST} {up.plain_port} {APPROVED}"
    await scene.workspace.start(
        PLANTER, f"python3 /workspace/probe.py {args} > /workspace/probe.log 2>&1"
    )
    # When the approved call runs (and waits for the planted process's attempts)
    approved = (
        "touch /workspace/approved-running; i=0; "
        "until [ -e /workspace/planted-done ] || [ $i -ge 1500 ]; do sleep 0.02; i=$((i+1)); done; "
        f"curl -sS --fail-with-body -X POST http://{HOST}:{up.plain_port}/hooks/approved"
    )
    await scene.run(APPROVED, approved)
    log = await scene.run("toolu_look", "cat /workspace/probe.log")
    # Then nothing of the approved call could be read or taken, and every change the planted
    # process sent was refused: only the approved call's POST reached the upstream
    assert "environs-with-approved=0" in log, log
    assert "server-environ=13" in log, log  # EACCES: outside the command's Landlock domain
    assert "server-mem=13" in log, log
    assert "vm_readv=1" in log, log  # EPERM
    assert "getfd=1" in log, log
    assert "port=98" in log, log  # EADDRINUSE: the server holds the proxy port
    assert "keepalive=200,407" in log, log  # each request proves its own caller: a guess is 407
    assert "socket=403" in log, log
    assert "two=407" in log, log
    assert "renamed=407" in log, log
    assert [(m, p) for m, p, _ in up.seen if m != "GET"] == [("POST", "/hooks/approved")]
