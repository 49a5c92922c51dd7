"""The jailed server starts fast and starts each command through a process forked ahead of
time (``server/child.py``), which the commands cannot reach nor hold up."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import sandbox_client.server
from sandbox_client import SandboxClient, landlock_abi
from tests.conftest import missing

SERVER_DIR = Path(sandbox_client.server.__file__).parent
HEAVY = ("asyncio", "subprocess", "typing", "dataclasses", "logging", "inspect", "platform")

# Three processes of a jail carry the server's command line: the jail's init (bwrap, pid 1, its
# parent outside: 0), the server (its parent: 1) and the spare (its parent: the server); a
# command's is its shell's. The bracket keeps these commands' own command lines from matching.
FIND_SPARE = (
    "for i in $(seq 500); do "
    "  for p in /proc/[0-9]*; do "
    "    grep -q 'sbx_serve[r].main' $p/cmdline 2>/dev/null || continue; "
    "    read -r _ _ _ ppid _ < $p/stat; [ $ppid -gt 1 ] && echo ${p#/proc/} && exit 0; "
    "  done; sleep 0.01; "
    "done; exit 1"
)
PEEK = (
    f"spare=$({FIND_SPARE}) || exit 1; read -r _ _ _ server _ < /proc/$spare/stat; "
    "for n in 1 $server $spare; do p=/proc/$n; "
    "readlink $p/fd/0 > /dev/null 2>&1 && echo link=read || echo link=refused; "
    "( exec 3<$p/fd/0 ) 2>/dev/null && echo fd=opened || echo fd=refused; "
    "cat $p/environ > /dev/null 2>&1 && echo environ=read || echo environ=refused; "
    "head -c1 $p/mem > /dev/null 2>&1 && echo mem=read || echo mem=refused; "
    "done"
)


def test_the_server_starts_without_heavy_imports() -> None:
    # Given the server as the jail runs it: isolated mode, another top-level name, no ssl
    with tempfile.TemporaryDirectory(prefix="wr-imp-") as tmp:
        (Path(tmp) / "sbx_server").symlink_to(SERVER_DIR)
        boot = (
            "import sys; sys.modules['ssl'] = None; "
            f"sys.path.insert(0, {tmp!r}); import sbx_server.main; "
            "print(' '.join(sorted(sys.modules)))"
        )
        loaded = subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", boot],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
    # Then none of the modules that made up most of its start-up is imported
    top = {name.split(".")[0] for name in loaded}
    assert not top & set(HEAVY), sorted(top & set(HEAVY))
    assert "ctypes" not in top  # the isolation's: loaded once the server said ready


async def test_commands_cannot_reach_the_server_or_the_process_waiting_to_run_the_next(
    client: SandboxClient,
) -> None:
    if landlock_abi() == 0:
        missing("this kernel has no Landlock: commands are not isolated from each other")
    # When a command tries the descriptors, environment and memory of the jail's init, the
    # server, and the process forked ahead for the next command
    peek = await client.exec("peek-spare", PEEK, timeout_s=15)
    # Then the kernel refuses each (the spare's pipes would carry the next command's env)
    outcomes = peek.stdout.split()
    assert len(outcomes) == 12, peek  # init, the server and the spare, four tries each
    assert set(outcomes) == {"link=refused", "fd=refused", "environ=refused", "mem=refused"}


async def test_a_command_that_stops_or_kills_the_waiting_process_holds_nothing_up(
    client: SandboxClient,
) -> None:
    # When a command stops the process waiting to become the next command
    stop = await client.exec("stop-spare", f"kill -STOP $({FIND_SPARE})", timeout_s=15)
    assert stop.exit_code == 0, stop
    # Then the next command runs at once all the same (well before the start's time-out)
    after_stop = await client.exec("after-stop", "echo ran", timeout_s=3)
    assert (after_stop.exit_code, after_stop.stdout) == (0, "ran\n"), after_stop
    # And when a command kills it, the next command runs in a new one
    kill = await client.exec("kill-spare", f"kill -KILL $({FIND_SPARE})", timeout_s=15)
    assert kill.exit_code == 0, kill
    after_kill = await client.exec("after-kill", "echo ran", timeout_s=3)
    assert (after_kill.exit_code, after_kill.stdout) == (0, "ran\n"), after_kill
