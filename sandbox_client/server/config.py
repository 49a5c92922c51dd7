"""The settings one local SBX/1 server runs with, passed as a JSON argument.

A plain class rather than a dataclass: ``dataclasses`` costs import time in every
sandbox start.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # ``typing`` costs import time at every sandbox start
if TYPE_CHECKING:
    from typing import Any

_DEFAULTS: dict[str, Any] = {
    "root": "/workspace",
    "shell": "/bin/sh",
    "ready_fd": -1,
    "listen_fd": -1,
    "max_output_bytes": 1024 * 1024,
    "keepalive_s": 5.0,
    "drain_s": 0.2,
    "max_processes": 256,
    "max_retained_bytes": 64 * 1024 * 1024,
    "env": {},
    "max_body_bytes": 32 * 1024 * 1024,
    "max_read_bytes": 32 * 1024 * 1024,
    "egress_port": 0,
    "egress_socket": "",
    "rlimit_as_bytes": 0,
    "rlimit_nproc": 0,
}


class ServerConfig:
    """How a sandbox's server behaves (immutable once built).

    Attributes:
        socket_path: the Unix socket to listen on (a path inside the jail), unless
            ``listen_fd`` is given.
        listen_fd: a Unix socket already bound by the host to listen on (-1: bind
            ``socket_path``); the host binds it where the jail cannot write.
        root: the only directory tree the filesystem endpoints may touch.
        shell: the shell that runs commands (``shell -c command``).
        ready_fd: a file descriptor to write ``ready`` to once listening (-1: none).
        max_output_bytes: per process and per stream (stdout, stderr, combined logs):
            bytes kept, half from the head and half from the tail; also the bytes one
            streaming reply sends before it stops sending output events.
        keepalive_s: a streaming reply sends a keepalive event after this much silence
            (Blaxel: every 5 s).
        drain_s: after a command exits, how long to keep reading output that its
            leftover children still write to the same pipes before closing them.
        max_processes: finished process records kept; the oldest go first.
        max_retained_bytes: output kept by finished records, all together; past it the
            oldest records go first.
        env: the environment every command starts with (the sandbox's, set by the
            provider; a request's ``env`` is added to it).
        max_body_bytes: the largest request body accepted (file uploads).
        max_read_bytes: the largest file a GET returns.
        egress_port: a loopback port to forward to ``egress_socket`` (the egress gateway's
            socket inside the jail), for ``HTTP_PROXY``; 0: no forwarder.
        rlimit_as_bytes: when not 0, the address-space limit (``RLIMIT_AS``) the server
            sets on itself at start, inherited by every command (no memory cgroup).
        rlimit_nproc: when not 0, the same for ``RLIMIT_NPROC`` (no pids cgroup).
    """

    __slots__ = ("socket_path", *_DEFAULTS)

    socket_path: str
    root: str
    shell: str
    ready_fd: int
    listen_fd: int
    max_output_bytes: int
    keepalive_s: float
    drain_s: float
    max_processes: int
    max_retained_bytes: int
    env: dict[str, str]
    max_body_bytes: int
    max_read_bytes: int
    egress_port: int
    egress_socket: str
    rlimit_as_bytes: int
    rlimit_nproc: int

    def __init__(self, socket_path: str, **settings: Any) -> None:
        unknown = set(settings) - set(_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown server settings: {sorted(unknown)}")
        object.__setattr__(self, "socket_path", socket_path)
        for name, default in _DEFAULTS.items():
            object.__setattr__(self, name, type(default)(settings.get(name, default)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ServerConfig is immutable")

    def to_json(self) -> str:
        """This config as one JSON object (the server's command-line argument)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        return json.dumps(values, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ServerConfig:
        """Parse ``to_json`` output; unknown keys are ignored.

        Raises:
            ValueError: not a JSON object, or no ``socket_path``.
        """
        data: Any = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("socket_path"), str):
            raise ValueError("server config must be a JSON object with a socket_path")
        known = {k: v for k, v in data.items() if k in _DEFAULTS}
        return cls(data["socket_path"], **known)
