"""A real Prometheus for tests: TLS and basic auth (``--web.config.file``), scraping a small
exporter that the test controls.

Debian's ``prometheus`` package provides the binary (``.ci/run`` installs it); without it the
tests that need it skip loudly, or fail when ``CI`` is set.
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
from tests.conftest import missing

USER = "warroom"
# Not 127.0.0.1: inside a jail, localhost and 127.0.0.1 are the jail's own (NO_PROXY), while
# every 127/8 address is this host's loopback for the gateway.
HOST = "127.0.0.2"
PASSWORD = "prom-basic-7c41d0e2b9"


@dataclass
class Exporter:
    """The metrics the test serves; Prometheus scrapes them every second."""

    errors_total: int = 0

    async def metrics(self, _: web.Request) -> web.Response:
        text = (
            "# TYPE http_requests_total counter\n"
            f'http_requests_total{{service="checkout-api",code="500"}} {self.errors_total}\n'
        )
        return web.Response(text=text, content_type="text/plain")


@dataclass
class Prometheus:
    """A running Prometheus: its base URL, the CA that signed its certificate, the exporter."""

    base_url: str
    host: str
    port: int
    trust: ssl.SSLContext
    ca_pem: bytes
    exporter: Exporter


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def real_prometheus() -> AsyncIterator[Prometheus]:
    """Start Prometheus on 127.0.0.1 with TLS and basic auth; stop it afterwards."""
    binary = shutil.which("prometheus")
    if binary is None:
        missing("Prometheus is not installed (Debian package prometheus): .ci/run installs it")
    exporter = Exporter()
    app = web.Application()
    app.router.add_get("/metrics", exporter.metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    exporter_port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", exporter_port).start()
    directory = Path(tempfile.mkdtemp(prefix="wr-prom-"))
    ca = CertificateAuthority.create("prometheus test CA")
    host_cert = ca.host_certificate_pem(HOST)
    (directory / "tls.pem").write_bytes(host_cert.cert)
    (directory / "tls.key").write_bytes(host_cert.key)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (directory / "web.yml").write_text(
        "tls_server_config:\n"
        f"  cert_file: {directory / 'tls.pem'}\n"
        f"  key_file: {directory / 'tls.key'}\n"
        f"basic_auth_users:\n  {USER}: '{hashed}'\n"
    )
    (directory / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: checkout-api\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{exporter_port}']\n"
    )
    port = _free_port(HOST)
    process = await asyncio.create_subprocess_exec(
        binary,
        f"--config.file={directory / 'prometheus.yml'}",
        f"--web.config.file={directory / 'web.yml'}",
        f"--web.listen-address={HOST}:{port}",
        f"--storage.tsdb.path={directory / 'data'}",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    trust = ssl.create_default_context(cadata=ca.cert_pem().decode())
    base_url = f"https://{HOST}:{port}"
    try:
        await _until_scraped(base_url, trust, process)
        yield Prometheus(base_url, HOST, port, trust, ca.cert_pem(), exporter)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()
        await runner.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


async def _until_scraped(
    base_url: str, trust: ssl.SSLContext, process: asyncio.subprocess.Process
) -> None:
    """Wait (at most 30 s) until the exporter's target has been scraped once."""
    auth = httpx.BasicAuth(USER, PASSWORD)
    async with httpx.AsyncClient(verify=trust, auth=auth, trust_env=False) as client:
        for _ in range(300):
            if process.returncode is not None:
                raise AssertionError(f"prometheus exited with {process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                reply = await client.get(f"{base_url}/api/v1/query", params={"query": "up"})
                if reply.status_code == 200 and reply.json()["data"]["result"]:
                    return
            await asyncio.sleep(0.1)
    raise AssertionError("prometheus did not scrape its target within 30 s")
