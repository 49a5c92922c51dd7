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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bot.metrics import Metrics, default_metrics
from bot.settings import MissingSetting, Settings
from harness import ApprovalStatus, Checkpoint, InvalidMessage, Service
from memory_store import (
    Database,
    EgressEntry,
    EgressLog,
    EgressTokens,
    SessionStore,
)
from sandbox_client import (
    JailEgress,
    SandboxHandle,
    SetupStep,
    egress_socket,
    provision_error,
)
from sandbox_client.gateway import (
    READ_ONLY_METHODS,
    ApprovalCheck,
    CallCredentials,
    Caller,
    CertificateAuthority,
    EgressRecord,
    Gateway,
    GatewayOptions,
    Rule,
    Rules,
    TokenResolver,
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

    A tunnel rule's HTTPS is passed through unseen, so its methods and paths cannot apply
    there: only ``http://`` requests are checked against them.

    >>> describe_rule(Rules.parse("rules: [{name: prom, hosts: [prom.internal]}]").rules[0])
    'prom: prom.internal:80,443 / GET,HEAD (allowed)'
    >>> describe_rule(Rules.parse("rules: [{name: st, hosts: [st.io], tunnel: true}]").rules[0])
    'st: st.io:80,443 (tunnel: HTTPS passes untouched, any method and path; http:// / GET,HEAD)'
    """
    hosts = ",".join(rule.hosts) + ":" + ",".join(str(p) for p in rule.ports)
    what = ",".join(rule.paths) + " " + ",".join(rule.methods)
    channels = f" in {','.join(rule.channels)}" if rule.channels else ""
    if rule.tunnel:
        passes = "HTTPS passes untouched, any method and path"
        return f"{rule.name}: {hosts}{channels} (tunnel: {passes}; http:// {what})"
    if rule.inject is not None:
        secret = getattr(rule.inject, "token", None) or getattr(rule.inject, "password", None)
        secret = secret or getattr(rule.inject, "value", None)
        source = secret.describe() if secret is not None else "?"
        clear = ", also over plain http" if rule.allow_plaintext else ""
        injects = f"injects {rule.inject.type} from {source}{clear}"
        return f"{rule.name}: {hosts} {what}{channels} ({injects})"
    return f"{rule.name}: {hosts} {what}{channels} (allowed)"


def services_of(rules: Rules) -> tuple[Service, ...]:
    """The systems the model is told it can reach: the rules that name a ``base_url``, in
    file order (no secret: only whether one is added)."""
    return tuple(
        Service(
            name=rule.name,
            base_url=rule.base_url,
            description=rule.description,
            methods=rule.methods,
            credential=rule.inject is not None,
            channels=rule.channels,
        )
        for rule in rules.rules
        if rule.base_url
    )


def jail_egress(settings: Settings) -> JailEgress | None:
    """What each local jail needs to reach the gateway (the CA is made on first use).

    Blocking file I/O: call at start-up, not on a worker's loop.
    """
    rules = load_rules(settings)
    if rules is None:
        return None
    directory = gateway_dir(settings)
    trust = CertificateAuthority.load_or_create(directory).write_trust(directory)
    return JailEgress(
        ca_bundle=trust.ca_bundle,
        ca_cert=trust.ca_cert,
        port=settings.egress_port,
        no_proxy=direct_hosts(rules),
    )


LOOPBACK_NAMES = ("localhost", "127.0.0.1")
"""The loopback names programs reach directly (``NO_PROXY``) unless a rule names them."""


def direct_hosts(rules: Rules) -> tuple[str, ...]:
    """The loopback names a sandbox's programs reach directly, bypassing the gateway
    (``NO_PROXY``): ``localhost`` and ``127.0.0.1``, less those a rule names. A rule for
    ``localhost:8080`` means a service on the gateway's host, which only the gateway can
    reach; left in ``NO_PROXY`` (where curl also matches its subdomains), the request would
    go to the sandbox's own loopback and find nothing there.

    >>> direct_hosts(Rules.parse("rules: [{name: prom, hosts: [prom.internal]}]"))
    ('localhost', '127.0.0.1')
    >>> direct_hosts(Rules.parse("rules: [{name: dev, hosts: [localhost], ports: [8080]}]"))
    ('127.0.0.1',)
    >>> direct_hosts(Rules.parse("rules: [{name: dev, hosts: ['*.localhost', 127.0.0.1]}]"))
    ()
    """
    named = {host.lower().removeprefix("*.") for rule in rules.rules for host in rule.hosts}
    return tuple(
        name
        for name in LOOPBACK_NAMES
        if not any(host == name or host.endswith("." + name) for host in named)
    )


def upstream_trust(extra_ca: Path | None) -> ssl.SSLContext:
    """What upstream services' certificates are checked against: the system's CAs, plus an
    internal CA file (``WARROOM_EGRESS_UPSTREAM_CA``) for services inside the company."""
    context = ssl.create_default_context()
    if extra_ca is not None:
        context.load_verify_locations(cafile=str(extra_ca))
    return context


REMOTE_TRUST_DIR = "/workspace/.warroom"  # a remote sandbox's copy of the trust files


def remote_setup(settings: Settings) -> tuple[SetupStep, ...]:
    """Set-up steps that give a remote sandbox the gateway's trust files (none without
    ``WARROOM_GATEWAY_URL``). Blocking file I/O: call at start-up."""
    if settings.gateway_url is None or settings.egress_rules is None:
        return ()
    directory = gateway_dir(settings)
    trust = CertificateAuthority.load_or_create(directory).write_trust(directory)
    return (
        SetupStep.file(f"{REMOTE_TRUST_DIR}/ca-bundle.pem", trust.ca_bundle.read_bytes()),
        SetupStep.file(f"{REMOTE_TRUST_DIR}/egress-ca.pem", trust.ca_cert.read_bytes()),
    )


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")


def local_env(port: int, userinfo: str) -> dict[str, str]:
    """A local jail command's proxy variables: the jail's loopback proxy port, with the call's
    per-call credential as user info (``CallCredentials.userinfo``); the jail's session-wide
    variables (no credential) stay for processes started otherwise.

    >>> local_env(3128, "toolu_1:c")["HTTPS_PROXY"]
    'http://toolu_1:c@127.0.0.1:3128'
    """
    return {name: f"http://{userinfo}@127.0.0.1:{port}" for name in PROXY_VARIABLES}


def remote_env(
    gateway_url: str, userinfo: str, direct: tuple[str, ...] = LOOPBACK_NAMES
) -> dict[str, str]:
    """A remote sandbox command's proxy and trust variables: the call's id and its session's
    token with the per-call credential in the proxy URL (``CallCredentials.userinfo`` with the
    token and a ``.`` as prefix), so the gateway knows the session and proves the call;
    ``direct``: the names reached without the gateway (``direct_hosts``).

    >>> remote_env("http://gw.internal:3128", "toolu_1:tok.c")["HTTPS_PROXY"]
    'http://toolu_1:tok.c@gw.internal:3128'
    """
    parts = urlsplit(gateway_url)
    proxy = f"{parts.scheme}://{userinfo}@{parts.netloc}"
    env = {name: proxy for name in PROXY_VARIABLES}
    env |= {"NO_PROXY": ",".join(direct), "no_proxy": ",".join(direct)}
    bundle = f"{REMOTE_TRUST_DIR}/ca-bundle.pem"
    env |= {n: bundle for n in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    return env | {"NODE_EXTRA_CA_CERTS": f"{REMOTE_TRUST_DIR}/egress-ca.pem"}


@dataclass
class WorkerEgress:
    """A worker's gateway, and the ``EgressBinder`` the harness calls before each command.

    Local jails are served by this worker's gateway through their socket; remote sandboxes
    reach the deployment's ``warroom gateway`` at ``gateway_url`` with their session's token.
    Each command gets its call's own proxy credential (``calls``) in its environment.
    """

    gateway: Gateway
    calls: CallCredentials
    egress_port: int
    tokens: EgressTokens | None = None
    gateway_url: str | None = None
    _issued: dict[str, str] = field(default_factory=dict)

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

        approved = approval_check(SessionStore(db)) if settings.approvals else None
        calls = CallCredentials.derived_from(authority.key)
        options = GatewayOptions(upstream_verify=trust, approved=approved, calls=calls)
        gateway = Gateway(rules, authority, secrets, audit, options)
        port = settings.egress_port
        return cls(gateway, calls, port, EgressTokens(db), settings.gateway_url)

    def services(self) -> tuple[Service, ...]:
        """What the model is told it can reach through this gateway (``services_of``)."""
        return services_of(self.gateway.rules)

    def credential_rule(self, method: str, url: str) -> str | None:
        """The rule through which a changing request to ``url`` would need an approved call at
        the gateway (any method: one the rule does not list is refused there anyway), or
        None (§13): a credential rule, or one that allows a changing method."""
        return changing_rule_of(self.gateway.rules, url)

    async def __call__(
        self, handle: SandboxHandle, *, session_id: str, channel_id: str, tool_use_id: str
    ) -> Mapping[str, str]:
        """Route ``handle``'s requests for ``tool_use_id``: bind a local jail's socket here, or
        give a remote sandbox's command its proxy variables; either way the command's proxy
        URL carries its call's credential (the jail's own variables carry none).

        Raises:
            SandboxCannotStart: the jail's socket cannot be served here (its run directory
                cannot be written): no command of it could reach the gateway.
            ProvisionFailed: the same for a passing shortage (``EMFILE``, …).
        """
        if handle.provider == "local" and handle.socket_path is not None:
            caller = Caller(session_id, channel_id)
            path = egress_socket(Path(handle.socket_path))
            try:
                await self.gateway.bind(path, caller)
            except OSError as exc:
                reason = f"the egress gateway cannot serve its socket {path}: {exc}"
                raise provision_error(handle.sandbox_id, reason, exc) from exc
            return local_env(self.egress_port, self.calls.userinfo(session_id, tool_use_id))
        if self.gateway_url is None or self.tokens is None:
            return {}
        token = self._issued.get(session_id)
        if token is None:
            token = await self.tokens.issue(session_id, channel_id, sign=self.calls.signed_token)
            self._issued[session_id] = token
        userinfo = self.calls.userinfo(session_id, tool_use_id, password_prefix=f"{token}.")
        return remote_env(self.gateway_url, userinfo, direct_hosts(self.gateway.rules))

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Stop serving every jail; requests in flight get ``grace_s`` to finish."""
        await self.gateway.aclose(grace_s)


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


STOP_GRACE_S = 5.0


async def run_gateway(settings: Settings, *, stop: asyncio.Event) -> None:
    """``warroom gateway``: serve remote sandboxes on ``WARROOM_GATEWAY_LISTEN`` until ``stop``.

    Each connection names its session by the token in its proxy URL; tokens are looked up in
    the database (a revoked token stops working within ``GatewayOptions.token_ttl_s``). Once
    ``stop`` is set no connection is accepted, and requests in flight get ``STOP_GRACE_S``
    to finish: a graceful stop, like ``serve`` and ``worker``, whose command exits 0.

    Raises:
        MissingSetting: no ``WARROOM_EGRESS_RULES``.
        RulesError, MissingSecret, OSError: the rules or a secret they name are wrong.
    """
    if settings.egress_rules is None:
        raise MissingSetting("WARROOM_EGRESS_RULES", "the gateway serves the egress rules")
    host, _, port = settings.gateway_listen.rpartition(":")
    db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
    await db.migrate()
    worker = await WorkerEgress.open(settings, db, default_metrics())
    if worker is None or worker.tokens is None:  # cannot happen: the rules file is set
        raise MissingSetting("WARROOM_EGRESS_RULES", "the gateway serves the egress rules")
    resolve = _owner_of(worker.tokens)
    try:
        await worker.gateway.serve_tokens(host or "127.0.0.1", int(port), resolve)
        log.info("egress gateway listening on %s", settings.gateway_listen)
        await stop.wait()
        log.info("egress gateway stopping: requests in flight may finish (%g s)", STOP_GRACE_S)
    finally:
        await worker.aclose(STOP_GRACE_S)
        await db.dispose()


def _owner_of(tokens: EgressTokens) -> TokenResolver:
    """Token → caller (its session; the call is proved by the gateway), one query each
    (the gateway remembers answers: ``GatewayOptions.token_ttl_s``)."""

    async def resolve(token: str) -> Caller | None:
        owner = await tokens.owner(token)
        return None if owner is None else Caller(owner.session_id, owner.channel_id)

    return resolve


def changing_rule_of(rules: Rules, url: str) -> str | None:
    r"""The name of the first rule covering ``url``'s host, port and path through which a
    change needs an approved call at the gateway: one that injects a secret or allows a
    method other than GET and HEAD (tunnel rules' HTTPS passes unseen, so they are not
    named), or None.

    >>> rules = Rules.parse(
    ...     "rules:\n- name: pd\n  hosts: [api.pagerduty.com]\n"
    ...     "  inject: {type: bearer, token: {env: PD}}\n"
    ...     "- name: hook\n  hosts: [hooks.example.com]\n  methods: [GET, POST]\n"
    ...     "- name: read\n  hosts: [example.com]\n"
    ... )
    >>> [changing_rule_of(rules, f"https://{h}/x") for h in
    ...     ("api.pagerduty.com", "hooks.example.com", "example.com")]
    ['pd', 'hook', None]
    """
    parts = urlsplit(url if "://" in url else "http://" + url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    path = parts.path or "/"
    for rule in rules.rules:
        covers = rule.matches_host(host, port) and any(map(path.startswith, rule.paths))
        changes = rule.inject is not None or not set(rule.methods) <= set(READ_ONLY_METHODS)
        if covers and changes and not rule.tunnel:
            return rule.name
    return None


def approval_check(sessions: SessionStore) -> ApprovalCheck:
    """The gateway's question "is this call an approved one, running now?" (§13), answered
    from the session's committed checkpoint: its approval is approved, for this ``tool_use``,
    and that call's intent is committed without a result (it is in flight). The database is
    the truth, so the answer holds across workers, deploys and the remote gateway."""

    async def approved(session_id: str, tool_use_id: str) -> bool:
        session = await sessions.get(session_id)
        if session is None:
            return False
        try:
            cp = Checkpoint.from_json(session.checkpoint)
        except InvalidMessage:
            return False
        approval = cp.approval
        return (
            approval is not None
            and approval.status is ApprovalStatus.APPROVED
            and approval.tool_use_id == tool_use_id
            and cp.in_flight == tool_use_id
        )

    return approved
