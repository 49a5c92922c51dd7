"""The bubblewrap command line of one sandbox (pure: paths in, argv out).

Inside the jail: new user, pid, ipc, uts and cgroup namespaces (and net, unless the
policy is ``host``); no capabilities; an environment holding only what the config
allows; the host's system directories read-only; ``/workspace`` a writable tmpfs of
``limits.workspace_max_bytes`` (see ``limits`` for why a tmpfs); the server's
socket directory at ``/run/warroom``; read-only ``/memory``, ``/skills``, ``/incident``
holding only a note that Warroom's file tools serve those paths.
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
RUN_DIR = "/run/warroom"
SERVER_DIR = "/opt/warroom/sbx_server"
SOCKET_NAME = "sbx.sock"
EGRESS_SOCKET_NAME = "egress.sock"  # served by the egress gateway, in the same run directory
CA_BUNDLE = "/etc/warroom/ca-bundle.pem"
EGRESS_CA = "/etc/warroom/egress-ca.pem"
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
VIRTUAL_MOUNTS = ("memory", "skills", "incident")
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

    run_dir: Path
    stubs: Path  # holds memory/, skills/, incident/ with their notes
    server_dir: Path  # the ``sandbox_client/server`` package

    @property
    def socket(self) -> Path:
        """The server's socket as the host sees it."""
        return self.run_dir / SOCKET_NAME


def egress_socket(sandbox_socket: Path) -> Path:
    """Where the gateway serves a jail whose server listens at ``sandbox_socket`` (host path)."""
    return sandbox_socket.parent / EGRESS_SOCKET_NAME


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
    config: LocalConfig, ready_fd: int, shell: str, rlimits: tuple[str, ...] = ()
) -> ServerConfig:
    """The server's settings for a jail (paths as seen inside it); ``rlimits`` names the
    limits (``memory``, ``pids``) the server sets on itself, no cgroup enforcing them."""
    limits = config.limits
    return ServerConfig(
        socket_path=f"{RUN_DIR}/{SOCKET_NAME}",
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
    rlimits: tuple[str, ...] = (),
) -> list[str]:
    """The full ``bwrap … -- python … CONFIG`` command."""
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    server = server_config(config, ready_fd, shell, rlimits).to_json()
    return [
        config.bwrap,
        *_namespaces(config.network),
        *_environment(sandbox_env(config, shell)),
        *_system_binds(config),
        *_workspace(config.limits.workspace_max_bytes),
        *_sandbox_binds(paths),
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
    # directory the settings name) must land on the tmpfs, not be hidden by it
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
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


def _workspace(max_bytes: int) -> list[str]:
    """``/workspace``: a tmpfs of ``max_bytes`` (the kernel's default size for 0)."""
    size = ["--size", str(max_bytes)] if max_bytes else []
    return [*size, "--tmpfs", WORKSPACE]


def _sandbox_binds(paths: JailPaths) -> list[str]:
    args = ["--bind", str(paths.run_dir), RUN_DIR]
    args += ["--ro-bind", str(paths.server_dir), SERVER_DIR]
    for name in VIRTUAL_MOUNTS:
        args += ["--ro-bind", str(paths.stubs / name), f"/{name}"]
    return args


def stub_note(name: str) -> str:
    """The note inside the read-only ``/memory``, ``/skills`` or ``/incident`` stub."""
    return (
        f"/{name} is not on this sandbox's filesystem.\n"
        f"Warroom serves /{name} from its database through its file tools: use Read, Write,\n"
        f"Edit, Glob and Grep with /{name}/... paths instead of shell commands.\n"
    )
