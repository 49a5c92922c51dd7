"""The egress gateway in a worker: built from ``Settings``, bound to each jail, audited.

Without ``WARROOM_EGRESS_RULES`` there is no gateway and a sandbox reaches nothing (or the
host's network, with ``WARROOM_SANDBOX_NETWORK=host``). With it, every worker runs the gateway
in its own event loop and serves the jails whose commands it runs (docs/architecture.md §11):
secrets come from this process's environment, by the names the rules give.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from bot.metrics import Metrics
from bot.settings import Settings
from harness import Service
from memory_store import Database, EgressEntry, EgressLog
from sandbox_client import JailEgress, SandboxHandle, egress_socket
from sandbox_client.gateway import (
    Caller,
    CertificateAuthority,
    EgressRecord,
    Gateway,
    GatewayOptions,
    Rule,
    Rules,
    prepare,
)

log = logging.getLogger(__name__)
GATEWAY_DIR = "gateway"


def gateway_dir(settings: Settings) -> Path:
    """Where the gateway keeps its CA (key mode 0600) and the trust files sandboxes get."""
    return settings.data_dir / GATEWAY_DIR


def load_rules(settings: Settings) -> Rules | None:
    """The rules file the settings name, parsed; None when there is none.

    Raises:
        RulesError: the file does not validate (each problem names its line).
        OSError: the file cannot be read.
    """
    if settings.egress_rules is None:
        return None
    path = settings.egress_rules
    return Rules.parse(path.read_text(encoding="utf-8"), source=str(path))


def describe_rule(rule: Rule) -> str:
    """One line for ``doctor``: what a rule lets through, and where its secret comes from.

    >>> describe_rule(Rules.parse("rules: [{name: prom, hosts: [prom.internal]}]").rules[0])
    'prom: prom.internal:80,443 / GET,HEAD (allowed)'
    """
    hosts = ",".join(rule.hosts) + ":" + ",".join(str(p) for p in rule.ports)
    what = ",".join(rule.paths) + " " + ",".join(rule.methods)
    if rule.inject is not None:
        secret = getattr(rule.inject, "token", None) or getattr(rule.inject, "password", None)
        secret = secret or getattr(rule.inject, "value", None)
        source = secret.describe() if secret is not None else "?"
        return f"{rule.name}: {hosts} {what} (injects {rule.inject.type} from {source})"
    return f"{rule.name}: {hosts} {what} ({'tunnel' if rule.tunnel else 'allowed'})"


def services_of(rules: Rules) -> tuple[Service, ...]:
    """The systems the model is told it can reach: the rules that name a ``base_url``."""
    return tuple(
        Service(
            name=rule.name,
            base_url=rule.base_url,
            description=rule.description,
            methods=rule.methods,
            credential=rule.inject is not None,
        )
        for rule in rules.rules
        if rule.base_url
    )


def jail_egress(settings: Settings) -> JailEgress | None:
    """What each local jail needs to reach the gateway (the CA is made on first use).

    Blocking file I/O: call at start-up, not on a worker's loop.
    """
    if settings.egress_rules is None:
        return None
    directory = gateway_dir(settings)
    trust = CertificateAuthority.load_or_create(directory).write_trust(directory)
    return JailEgress(ca_bundle=trust.ca_bundle, ca_cert=trust.ca_cert, port=settings.egress_port)


def upstream_trust(extra_ca: Path | None) -> ssl.SSLContext:
    """What upstream services' certificates are checked against: the system's CAs, plus an
    internal CA file (``WARROOM_EGRESS_UPSTREAM_CA``) for services inside the company."""
    context = ssl.create_default_context()
    if extra_ca is not None:
        context.load_verify_locations(cafile=str(extra_ca))
    return context


@dataclass
class WorkerEgress:
    """A worker's gateway, and the ``EgressBinder`` the harness calls before each command."""

    gateway: Gateway

    @classmethod
    async def open(cls, settings: Settings, db: Database, metrics: Metrics) -> WorkerEgress | None:
        """Build the gateway (None without rules).

        Raises:
            RulesError, MissingSecret, OSError: the rules or a secret they name are wrong.
        """
        rules = await asyncio.to_thread(load_rules, settings)
        if rules is None:
            return None
        authority = await asyncio.to_thread(
            CertificateAuthority.load_or_create, gateway_dir(settings)
        )
        secrets = prepare(rules.rules, dict(os.environ))
        trust = await asyncio.to_thread(upstream_trust, settings.egress_upstream_ca)
        audit_log = EgressLog(db)

        async def audit(record: EgressRecord) -> None:
            metrics.count_egress(record.outcome.value, record.rule or "")
            try:
                await audit_log.record(_entry(record))
            except Exception:  # the audit never breaks a request; the log says it was lost
                log.exception("egress audit row lost: %s %s", record.method, record.host)

        options = GatewayOptions(upstream_verify=trust)
        return cls(Gateway(rules, authority, secrets, audit, options))

    async def __call__(
        self, handle: SandboxHandle, *, session_id: str, channel_id: str, tool_use_id: str
    ) -> None:
        """Serve ``handle``'s jail from this worker, for ``tool_use_id``."""
        if handle.provider != "local" or handle.socket_path is None:
            return
        caller = Caller(session_id, channel_id, tool_use_id=lambda: tool_use_id)
        await self.gateway.bind(egress_socket(Path(handle.socket_path)), caller)

    async def aclose(self) -> None:
        """Stop serving every jail."""
        await self.gateway.aclose()


def _entry(record: EgressRecord) -> EgressEntry:
    return EgressEntry(
        session_id=record.session_id,
        tool_use_id=record.tool_use_id,
        at=record.at,
        method=record.method,
        host=record.host,
        port=record.port,
        path=record.path,
        status=record.status,
        bytes=record.bytes,
        duration_ms=record.duration_ms,
        rule=record.rule,
        outcome=record.outcome.value,
    )
