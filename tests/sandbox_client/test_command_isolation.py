"""Each command of a sandbox is out of reach of the others' processes (a Landlock domain of its
own), and the sandbox's API answers the host only: what keeps a call's proxy credential its own."""

from __future__ import annotations

from sandbox_client import SandboxClient, landlock_abi
from tests.conftest import missing

from .conftest import wait_for

SECRET = "per-call-credential-4f9d"
# A command that waits, holding the secret in its environment, until told to go.
HOLDER = "touch /workspace/holding; while [ ! -e /workspace/go ]; do sleep 0.01; done"
PEEK = (
    "for p in /proc/[0-9]*; do grep -q 'holding[;] while' $p/cmdline 2>/dev/null || continue; "
    "cat $p/environ > /dev/null 2>&1 && echo environ=read || echo environ=refused; "
    "head -c1 $p/mem > /dev/null 2>&1 && echo mem=read || echo mem=refused; "
    "( exec 3<$p/fd/1 ) 2>/dev/null && echo fd=read || echo fd=refused; "
    "done"
)


async def test_a_command_cannot_read_another_commands_environment(client: SandboxClient) -> None:
    if landlock_abi() == 0:
        missing("this kernel has no Landlock: commands are not isolated from each other")
    # Given a running command holding a secret in its environment
    await client.start("holder", HOLDER, env={"HTTPS_PROXY": f"http://toolu_1:{SECRET}@x:1"})

    probes = iter(range(1_000_000))

    async def holding() -> bool:  # a name each look: a finished name is only looked up again
        name = f"probe-{next(probes)}"
        return (await client.exec(name, "ls /workspace/holding", timeout_s=10)).exit_code == 0

    await wait_for(holding, what="the holder to start")
    # When another command of the same sandbox tries its environment, memory and files
    peek = await client.exec("peek", PEEK, timeout_s=10)
    await client.exec("go", "touch /workspace/go", timeout_s=10)
    # Then the kernel refuses each (for the holder, and for its subshell while it forks sleep)
    assert set(peek.stdout.split()) == {"environ=refused", "mem=refused", "fd=refused"}, peek
    assert SECRET not in peek.stdout + peek.stderr


async def test_the_sandbox_api_answers_the_host_not_its_own_commands(client: SandboxClient) -> None:
    # Given the host reaches the sandbox's API (this test's client does)
    await client.health()
    # When a command of the sandbox calls the same API through its socket
    record = await client.exec(
        "api",
        "curl -s -w ' %{http_code}' --unix-socket /run/warroom/sbx.sock http://sbx/process",
        timeout_s=10,
    )
    # Then it cannot reach it (the server's socket is not in the jail) or is refused, and
    # learns nothing of the other commands
    assert record.stdout.endswith((" 000", " 403")), record
    assert "holder" not in record.stdout
