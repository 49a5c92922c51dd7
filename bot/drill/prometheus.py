"""A real Prometheus behind TLS and basic auth: the drill's metrics system, and the tests'.

Debian's ``prometheus`` package gives the server and ``promtool``. The server listens on
``HOST`` (a loopback address other than 127.0.0.1: inside a jail 127.0.0.1 and localhost are
the jail's own, in ``NO_PROXY``) with a certificate from a CA of its own and one basic-auth
user (``--web.config.file``; Prometheus keeps only the password's bcrypt hash). It scrapes a
small exporter on 127.0.0.1 every second (``Exporter``: a counter the caller sets), and can
start with history: OpenMetrics text written into its storage by ``promtool tsdb
create-blocks-from openmetrics`` before it starts, so a series can hold an incident's past
minutes at their own times (Prometheus docs, "Storage: Backfilling from OpenMetrics format").
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import ssl
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import httpx
from aiohttp import web

from sandbox_client.gateway import CertificateAuthority

USER = "warroom"
HOST = "127.0.0.2"
READY_TIMEOUT_S = 30.0
POLL_S = 0.1
MISSING = "Prometheus is not installed (Debian package prometheus, which has promtool)"


class PrometheusFailed(RuntimeError):
    """Prometheus did not start, or its history could not be written (the message says why)."""


def missing() -> str | None:
    """Why a real Prometheus cannot run here (a binary is not on ``PATH``), or None."""
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        return MISSING
    return None


@dataclass
class Exporter:
    """The live metrics Prometheus scrapes: ``errors_total`` is checkout-api's 500 counter."""

    errors_total: int = 0

    async def metrics(self, _: web.Request) -> web.Response:
        """``GET /metrics`` in Prometheus's text format."""
        text = (
            "# TYPE http_requests_total counter\n"
            f'http_requests_total{{service="checkout-api",code="500"}} {self.errors_total}\n'
        )
        return web.Response(text=text, content_type="text/plain")


@dataclass(frozen=True)
class Prometheus:
    """A running Prometheus.

    Attributes:
        base_url: ``https://HOST:port``.
        trust: a client context trusting the CA that signed its certificate.
        ca_pem: that CA's certificate, PEM (for ``WARROOM_EGRESS_UPSTREAM_CA``).
        password: the basic-auth password of ``USER``.
    """

    base_url: str
    host: str
    port: int
    trust: ssl.SSLContext
    ca_pem: bytes
    password: str
    exporter: Exporter


@contextlib.asynccontextmanager
async def real_prometheus(
    *, password: str, history: str = "", rules: str = "", alertmanager: str | None = None
) -> AsyncIterator[Prometheus]:
    """Start the exporter and Prometheus (see the module docstring); stop both afterwards.

    ``history``: OpenMetrics text (ending ``# EOF``) to load before Prometheus starts.
    ``rules``: a rule file's YAML (alerting rules, evaluated every second);
    ``alertmanager``: ``host:port`` of the Alertmanager its alerts are sent to.

    Raises:
        PrometheusFailed: a binary is missing, ``promtool`` refused the history, or
            Prometheus exited or did not scrape within ``READY_TIMEOUT_S``.
    """
    if (reason := missing()) is not None:
        raise PrometheusFailed(reason)
    directory = Path(tempfile.mkdtemp(prefix="wr-prom-"))
    exporter = Exporter()
    app = web.Application()
    app.router.add_get("/metrics", exporter.metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        exporter_port = _free_port("127.0.0.1")
        await web.TCPSite(runner, "127.0.0.1", exporter_port).start()
        ca = await asyncio.to_thread(
            _write_config, directory, password, exporter_port, rules, alertmanager
        )
        if history:
            await _backfill(directory, history)
        port = _free_port(HOST)
        trust = ssl.create_default_context(cadata=ca.cert_pem().decode())
        async with _running(directory, port) as process:
            running = Prometheus(
                f"https://{HOST}:{port}", HOST, port, trust, ca.cert_pem(), password, exporter
            )
            await _until_scraped(running, process)
            yield running
    finally:
        await runner.cleanup()
        await asyncio.to_thread(shutil.rmtree, directory, True)


def _write_config(
    directory: Path,
    password: str,
    exporter_port: int,
    rules: str = "",
    alertmanager: str | None = None,
) -> CertificateAuthority:
    """Write the TLS files, the web config (bcrypt hash) and the scrape config; return the CA.
    Blocking (a bcrypt hash, file I/O)."""
    ca = CertificateAuthority.create("prometheus CA")
    host_cert = ca.host_certificate_pem(HOST)
    (directory / "tls.pem").write_bytes(host_cert.cert)
    (directory / "tls.key").write_bytes(host_cert.key)
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    (directory / "web.yml").write_text(
        "tls_server_config:\n"
        f"  cert_file: {directory / 'tls.pem'}\n"
        f"  key_file: {directory / 'tls.key'}\n"
        f"basic_auth_users:\n  {USER}: '{hashed}'\n"
    )
    config = (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: checkout-api\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{exporter_port}']\n"
    )
    if rules:
        (directory / "rules.yml").write_text(rules)
        config += f"rule_files: ['{directory / 'rules.yml'}']\n"
    if alertmanager:
        config += (
            "alerting:\n  alertmanagers:\n"
            f"    - static_configs:\n        - targets: ['{alertmanager}']\n"
        )
    (directory / "prometheus.yml").write_text(config)
    return ca


async def _backfill(directory: Path, history: str) -> None:
    """Write ``history`` into the storage with ``promtool``."""
    source = directory / "history.om"
    await asyncio.to_thread(source.write_text, history)
    process = await asyncio.create_subprocess_exec(
        "promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet",
        str(source), str(directory / "data"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, errors = await process.communicate()
    if process.returncode != 0:
        raise PrometheusFailed(f"promtool could not load the history: {errors.decode()[-500:]}")


@contextlib.asynccontextmanager
async def _running(directory: Path, port: int) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        "prometheus",
        f"--config.file={directory / 'prometheus.yml'}",
        f"--web.config.file={directory / 'web.yml'}",
        f"--web.listen-address={HOST}:{port}",
        f"--storage.tsdb.path={directory / 'data'}",
        "--storage.tsdb.retention.time=100y",  # the history may be years old
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()


async def _until_scraped(prom: Prometheus, process: asyncio.subprocess.Process) -> None:
    """Wait until the exporter's target has been scraped once (``up`` has a result)."""
    auth = httpx.BasicAuth(USER, prom.password)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READY_TIMEOUT_S
    async with httpx.AsyncClient(verify=prom.trust, auth=auth, trust_env=False) as client:
        while loop.time() < deadline:
            if process.returncode is not None:
                raise PrometheusFailed(f"prometheus exited with {process.returncode}")
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                reply = await client.get(f"{prom.base_url}/api/v1/query", params={"query": "up"})
                if reply.status_code == 200 and reply.json()["data"]["result"]:
                    return
            await asyncio.sleep(POLL_S)
    raise PrometheusFailed(f"prometheus did not scrape its target within {READY_TIMEOUT_S:g} s")


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
