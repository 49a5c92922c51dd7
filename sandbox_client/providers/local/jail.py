"""The bubblewrap command line of one sandbox (pure: paths in, argv out).

Inside the jail: new user, pid, ipc, uts and cgroup namespaces (and net, unless the
policy is ``host``); no capabilities; an environment holding only what the config
allows; the host's system directories read-only; ``/workspace``, ``/tmp`` and
``/dev/shm`` writable tmpfs of the sizes ``limits`` gives (see ``limits`` for why a
tmpfs), and nothing else writable (the root and ``/dev`` are remounted read-only); read-only
``/memory``, ``/skills``, ``/incident``, ``/incidents`` holding only a note that Warroom's file
tools serve those paths.

Nothing the host follows or connects to lies where the jail can write. The server's
socket is bound by the host in the sandbox's state directory, which the jail does not
see, and handed to the server as a listening descriptor (``listen_fd``); the run
directory where the egress gateway serves the jail (``/run/warroom``) is bound
read-only, so the jail can connect to what the host put there but cannot replace,
rename, link or add a file in it (nor fill the host's disk through it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sandbox_client.providers.local.config import LocalConfig
from sandbox_client.server.config import ServerConfig

WORKSPACE = "/workspace"
TMP = "/tmp"
SHM = "/dev/shm"
RUN_DIR = "/run/warroom"
RUN_SUBDIR = "run"  # in the sandbox's state directory: the host side of RUN_DIR (read-only)
SERVER_DIR = "/opt/warroom/sbx_server"
SOCKET_NAME = "sbx.sock"
EGRESS_SOCKET_NAME = "egress.sock"  # served by the egress gateway, in the same run directory
CA_BUNDLE = "/etc/warroom/ca-bundle.pem"
EGRESS_CA = "/etc/warroom/egress-ca.pem"
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
VIRTUAL_MOUNTS = ("memory", "skills", "incident", "incidents")
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The server never speaks TLS: hiding ``ssl`` makes asyncio skip it (its imports are
# guarded), which saves a tenth of the server's start-up time.
_BOOT = (
    "import sys; sys.modules['ssl'] = None; sys.path.insert(0, '/opt/warroom'); "
    "from sbx_server.main import main; main()"
)
_MERGED_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ETC_FILES = (
    "passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "ld.so.cache",
    "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates",
    "ca-certificates.conf", "localtime", "timezone", "os-release", "debian_version",
    "bash.bashrc", "profile", "inputrc", "mime.types", "protocols", "services",
)  # fmt: skip


@dataclass(frozen=True)
class JailPaths:
    """Host paths of one sandbox."""

    sandbox_dir: Path  # the sandbox's state directory: never visible in the jail
    stubs: Path  # holds memory/, skills/, incident/ with their notes
    server_dir: Path  # the ``sandbox_client/server`` package

    @property
    def socket(self) -> Path:
        """The server's socket as the host sees it (bound by the host, outside the jail)."""
        return self.sandbox_dir / SOCKET_NAME

    @property
    def run_dir(self) -> Path:
        """The host directory the jail sees read-only at ``/run/warroom``."""
        return self.sandbox_dir / RUN_SUBDIR


def egress_socket(sandbox_socket: Path) -> Path:
    """Where the gateway serves a jail whose server listens at ``sandbox_socket`` (host
    path): the run directory next to it, which the jail sees read-only. A jail made by
    an earlier release (its server's socket inside the run directory) is served next to
    that socket until it is replaced."""
    if sandbox_socket.parent.name == RUN_SUBDIR:
        return sandbox_socket.parent / EGRESS_SOCKET_NAME
    return sandbox_socket.parent / RUN_SUBDIR / EGRESS_SOCKET_NAME


def sandbox_env(config: LocalConfig, shell: str) -> dict[str, str]:
    """The whole environment of the server and its commands: a base plus what the
    settings allow (``config.env``); nothing is inherited from the host."""
    base = {"PATH": BASE_PATH, "HOME": WORKSPACE, "LANG": "C.UTF-8", "SHELL": shell}
    return {**base, **_egress_env(config), **config.env}


def _egress_env(config: LocalConfig) -> dict[str, str]:
    """Proxy and trust variables that curl, Python, Go and Node programs all honour."""
    if config.egress is None:
        return {}
    proxy = f"http://127.0.0.1:{config.egress.port}"
    env = {name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    direct = ",".join(config.egress.no_proxy)
    env |= {"NO_PROXY": direct, "no_proxy": direct}
    bundle = {n: CA_BUNDLE for n in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    return env | bundle | {"NODE_EXTRA_CA_CERTS": EGRESS_CA}


def server_config(
    config: LocalConfig,
    ready_fd: int,
    shell: str,
    rlimits: tuple[str, ...] = (),
    *,
    listen_fd: int = -1,
) -> ServerConfig:
    """The server's settings for a jail (paths as seen inside it); ``rlimits`` names the
    limits (``memory``, ``pids``) the server sets on itself, no cgroup enforcing them;
    ``listen_fd`` is the socket the host bound for it (the server listens on it)."""
    limits = config.limits
    return ServerConfig(
        socket_path="",
        listen_fd=listen_fd,
        root=WORKSPACE,
        shell=shell,
        ready_fd=ready_fd,
        max_output_bytes=config.max_output_bytes,
        keepalive_s=config.keepalive_s,
        drain_s=config.drain_s,
        env=sandbox_env(config, shell),
        egress_port=config.egress.port if config.egress is not None else 0,
        egress_socket=f"{RUN_DIR}/{EGRESS_SOCKET_NAME}",
        rlimit_as_bytes=limits.memory_max_bytes if "memory" in rlimits else 0,
        rlimit_nproc=limits.pids_max if "pids" in rlimits else 0,
    )


def bwrap_argv(
    config: LocalConfig,
    paths: JailPaths,
    *,
    info_fd: int,
    ready_fd: int,
    listen_fd: int,
    rlimits: tuple[str, ...] = (),
) -> list[str]:
    """The full ``bwrap … -- python … CONFIG`` command; ``listen_fd`` is the bound,
    not yet listening, socket the server serves on (inherited through bwrap)."""
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    server = server_config(config, ready_fd, shell, rlimits, listen_fd=listen_fd).to_json()
    return [
        config.bwrap,
        *_namespaces(config.network),
        *_environment(sandbox_env(config, shell)),
        *_system_binds(config),
        *_tmpfs(WORKSPACE, config.limits.workspace_max_bytes),
        *_sandbox_binds(paths),
        "--remount-ro", "/",
        "--chdir", WORKSPACE,
        "--info-fd", str(info_fd),
        "--",
        config.python, "-I", "-S", "-B", "-c", _BOOT, server,
    ]  # fmt: skip


def _namespaces(network: str) -> list[str]:
    args = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    args += ["--unshare-cgroup-try", "--new-session", "--cap-drop", "ALL"]
    args += ["--hostname", "sandbox"]
    if network == "none":
        args.append("--unshare-net")
    return args


def _environment(env: Mapping[str, str]) -> list[str]:
    args = ["--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    return args


def _system_binds(config: LocalConfig) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _MERGED_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    for name in _ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # the jail's own /proc, /dev and /tmp first: a bind below /tmp (an interpreter or a
    # directory the settings name) must land on the tmpfs, not be hidden by it. /dev is
    # read-only but for its devices and a sized /dev/shm.
    limits = config.limits
    args += ["--proc", "/proc", "--dev", "/dev", *_tmpfs(SHM, limits.shm_max_bytes)]
    args += ["--remount-ro", "/dev", *_tmpfs(TMP, limits.tmp_max_bytes)]
    for extra in (*_python_dirs(config.python), *config.ro_binds):
        args += ["--ro-bind", extra, extra]
    if config.egress is not None:  # the system bundle too: some programs read only that
        bundle, ca = str(config.egress.ca_bundle), str(config.egress.ca_cert)
        args += ["--ro-bind", bundle, CA_BUNDLE, "--ro-bind", ca, EGRESS_CA]
        args += ["--ro-bind", bundle, SYSTEM_BUNDLE]
    return args


def _python_dirs(python: str) -> list[str]:
    """The interpreter's installation, unless ``/usr`` already holds it."""
    prefixes = {os.path.realpath(sys.base_prefix), str(Path(python).parent.parent)}
    return sorted(p for p in prefixes if p != "/" and not (p + "/").startswith("/usr/"))


def _tmpfs(where: str, max_bytes: int) -> list[str]:
    """A tmpfs of ``max_bytes`` at ``where`` (the kernel's default size for 0)."""
    size = ["--size", str(max_bytes)] if max_bytes else []
    return [*size, "--tmpfs", where]


def _sandbox_binds(paths: JailPaths) -> list[str]:
    args = ["--ro-bind", str(paths.run_dir), RUN_DIR]
    args += ["--ro-bind", str(paths.server_dir), SERVER_DIR]
    for name in VIRTUAL_MOUNTS:
        args += ["--ro-bind", str(paths.stubs / name), f"/{name}"]
    return args


def stub_note(name: str) -> str:
    """The note inside the read-only ``/memory``, ``/skills``, ``/incident`` or
    ``/incidents`` stub."""
    if name == "incidents":
        return (
            "/incidents is not on this sandbox's filesystem.\n"
            "Warroom serves the org's past incidents under /incidents from its database, "
            "read-only:\nuse Read, Glob and Grep with /incidents/... paths instead of shell "
            "commands.\n"
        )
    return (
        f"/{name} is not on this sandbox's filesystem.\n"
        f"Warroom serves /{name} from its database through its file tools: use Read, Write,\n"
        f"Edit, Glob and Grep with /{name}/... paths instead of shell commands.\n"
    )
