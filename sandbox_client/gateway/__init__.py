"""The egress gateway: the sandbox's only way out, holding the credentials (§11).

``rules`` (what may pass, and what is injected), ``ca`` (the deployment's CA and host
certificates), ``credentials`` (secrets by reference, injection, scrubbing), ``calls``
(per-call proxy credentials: which call a request comes from), ``proxy`` (the HTTP proxy
itself), ``upstream`` (its kept-alive connections to the systems it reaches).
"""

from sandbox_client.gateway.ca import CertificateAuthority, TrustFiles
from sandbox_client.gateway.calls import CallCredentials
from sandbox_client.gateway.credentials import REDACTED, Injected, MissingSecret, Scrubber, prepare
from sandbox_client.gateway.proxy import (
    ApprovalCheck,
    AuditSink,
    Caller,
    EgressRecord,
    Gateway,
    GatewayOptions,
    TokenResolver,
)
from sandbox_client.gateway.rules import (
    READ_ONLY_METHODS,
    Decision,
    Outcome,
    RequestLine,
    Rule,
    Rules,
    RulesError,
    SecretRef,
)

__all__ = [
    # rules
    "READ_ONLY_METHODS",
    "Decision",
    "Outcome",
    "RequestLine",
    "Rule",
    "Rules",
    "RulesError",
    "SecretRef",
    # credentials
    "REDACTED",
    "Injected",
    "MissingSecret",
    "Scrubber",
    "prepare",
    # calls and approvals
    "ApprovalCheck",
    "CallCredentials",
    # the proxy
    "AuditSink",
    "Caller",
    "CertificateAuthority",
    "EgressRecord",
    "Gateway",
    "GatewayOptions",
    "TokenResolver",
    "TrustFiles",
]
