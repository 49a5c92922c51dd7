"""The egress gateway: the sandbox's only way out, holding the credentials (§11).

``rules`` (what may pass, and what is injected), ``paths`` and ``methods`` (a request's path
and method as judged: one normal form, overrides seen), ``ca`` (the deployment's CA and host
certificates), ``credentials`` (secrets by reference, injection), ``scrubber`` (secrets
removed from replies), ``calls`` (per-call proxy credentials: which call a request comes
from), ``proxy`` (the HTTP proxy itself), ``upstream`` (its kept-alive connections to the
systems it reaches).
"""

from sandbox_client.gateway.ca import CertificateAuthority, TrustFiles
from sandbox_client.gateway.calls import CallCredentials
from sandbox_client.gateway.credentials import Injected, MissingSecret, prepare
from sandbox_client.gateway.methods import AmbiguousMethod, effective_method, judged_method
from sandbox_client.gateway.paths import AmbiguousPath, normalise
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
from sandbox_client.gateway.scrubber import REDACTED, Scrubber, SecretForms

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
    # requests as judged
    "AmbiguousMethod",
    "AmbiguousPath",
    "effective_method",
    "judged_method",
    "normalise",
    # credentials
    "REDACTED",
    "Injected",
    "MissingSecret",
    "Scrubber",
    "SecretForms",
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
