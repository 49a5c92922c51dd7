"""The drill's way out of the sandbox: a real Prometheus, and the egress rule that reaches it.

Prometheus (``prometheus.real_prometheus``) holds checkout-api's request counters for the
incident's minutes (``scenario.prometheus_history``) behind TLS and basic auth. The rule
names it with ``base_url`` (so the model is told of it) and injects the password from a file
only the drill's processes read; the upstream CA file lets the gateway verify Prometheus's
certificate. Without ``prometheus``/``promtool`` or ``curl`` on this machine the scene is
skipped, with the reason, and the drill runs without egress rules, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from bot.drill import scenario
from bot.drill.errors import DrillError
from bot.drill.prometheus import USER, Prometheus, PrometheusFailed, missing, real_prometheus

EGRESS_DIR = "egress"


@dataclass(frozen=True)
class DrillEgress:
    """The running Prometheus and the files the drill's settings name.

    Attributes:
        rules: ``WARROOM_EGRESS_RULES``.
        upstream_ca: ``WARROOM_EGRESS_UPSTREAM_CA`` (the CA of Prometheus's certificate).
        secret: the password the gateway injects; it must never reach a sandbox, the model
            or Slack (the drill checks).
    """

    prometheus: Prometheus
    rules: Path
    upstream_ca: Path
    secret: str


def why_skipped() -> str | None:
    """Why the Prometheus scene cannot run here, or None when it can."""
    if (reason := missing()) is not None:
        return reason
    if shutil.which("curl") is None:
        return "curl is not installed (the scene runs it in the sandbox)"
    return None


async def start_egress(stack: contextlib.AsyncExitStack, data_dir: Path) -> DrillEgress:
    """Start Prometheus with the incident's history (stopped by ``stack``) and write the rules.

    Raises:
        DrillError: Prometheus did not start.
    """
    password = secrets.token_urlsafe(18)
    try:
        prom = await stack.enter_async_context(
            real_prometheus(password=password, history=scenario.prometheus_history())
        )
    except PrometheusFailed as exc:
        raise DrillError(f"Prometheus did not start: {exc}") from exc
    rules, upstream_ca = await asyncio.to_thread(_write, data_dir / EGRESS_DIR, prom)
    return DrillEgress(prom, rules, upstream_ca, password)


def _write(directory: Path, prom: Prometheus) -> tuple[Path, Path]:
    """Write the password (mode 0600), Prometheus's CA and the rules; return the rules' and
    the CA's paths. Blocking file I/O."""
    directory.mkdir(mode=0o700, exist_ok=True)
    secret_file = directory / "prometheus-password"
    fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(prom.password)
    upstream_ca = directory / "prometheus-ca.pem"
    upstream_ca.write_bytes(prom.ca_pem)
    rules = directory / "rules.yml"
    rules.write_text(
        "rules:\n"
        f"  - name: {scenario.PROMETHEUS}\n"
        f"    hosts: [{prom.host}]\n"
        f"    ports: [{prom.port}]\n"
        "    paths: [/api/v1/]\n"
        f"    inject: {{type: basic, username: {USER}, password: {{file: {secret_file}}}}}\n"
        f"    base_url: {prom.base_url}\n"
        "    description: checkout-api's request counters (http_requests_total by code)\n"
    )
    return rules, upstream_ca
