"""A real Alertmanager (Debian's ``prometheus-alertmanager``) for tests: one route to a webhook.

Short timings so a test is quick: ``group_wait`` and ``group_interval`` 1 s, and
``repeat_interval`` as given (a firing group is notified again that often). Clustering
is off (``--cluster.listen-address=``). Without the package the tests that need it
skip loudly, or fail when ``CI`` is set (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from tests.conftest import missing as skip_or_fail
from tests.ports import free_port

BINARIES = ("prometheus-alertmanager", "alertmanager")


def _binary() -> str | None:
    return next((b for b in BINARIES if shutil.which(b)), None)


@contextlib.asynccontextmanager
async def real_alertmanager(
    webhook_url: str, *, token: str, repeat_interval: str = "3s"
) -> AsyncIterator[str]:
    """Run Alertmanager posting every group to ``webhook_url`` with ``Bearer token``;
    yields its ``host:port``; stopped afterwards."""
    binary = _binary()
    if binary is None:
        skip_or_fail("Alertmanager is not installed (Debian package prometheus-alertmanager)")
    directory = Path(tempfile.mkdtemp(prefix="wr-am-"))
    (directory / "alertmanager.yml").write_text(
        "route:\n"
        "  receiver: warroom\n"
        "  group_by: [alertname]\n"
        "  group_wait: 1s\n"
        "  group_interval: 1s\n"
        f"  repeat_interval: {repeat_interval}\n"
        "receivers:\n"
        "  - name: warroom\n"
        "    webhook_configs:\n"
        f"      - url: {webhook_url}\n"
        "        send_resolved: true\n"
        "        http_config:\n"
        f"          authorization: {{credentials: {token}}}\n"
    )
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        binary,
        f"--config.file={directory / 'alertmanager.yml'}",
        f"--storage.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await _until_ready(f"http://127.0.0.1:{port}/-/ready", process)
        yield f"127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()
        shutil.rmtree(directory, ignore_errors=True)


async def _until_ready(url: str, process: asyncio.subprocess.Process) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30.0
    async with httpx.AsyncClient(timeout=2.0, trust_env=False) as http:
        while loop.time() < deadline:
            if process.returncode is not None:
                raise AssertionError(f"alertmanager exited with {process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise AssertionError("alertmanager was not ready within 30 s")
