"""What a session's sandbox can reach: the egress rules as the approval policy sees them (§13).

The policy asks two questions of it:

- ``change``: can anything the sandbox runs change something outside it? A rule that allows
  a method other than GET/HEAD, a tunnel rule (HTTPS passes unseen, any method) or the host's
  network (no gateway) say yes; a sandbox without a network, or with only GET/HEAD rules
  (with a credential or without: the gateway judges each request's effective method), says
  no. Code the policy cannot read (an interpreter's program, a script, a build tool) needs
  approval exactly when the answer is yes.
- ``route``: what would the gateway do with one request? Pass it (through which rule), or
  refuse it (why), or there is no gateway to ask.

Channel restrictions are ignored (a rule for another channel counts as reachable): the
policy may then ask where the gateway would refuse, never the reverse.

>>> rules = Rules.parse("rules: [{name: prom, hosts: [prom.internal]}]")
>>> reach = EgressReach(rules)
>>> reach.change is None, reach.route("DELETE", "http://prom.internal/api").refused
(True, 'DELETE is not allowed to prom.internal (only GET, HEAD)')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from sandbox_client.gateway import AmbiguousPath, Outcome, RequestLine, Rules, normalise

READ_ONLY_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Route:
    """What the egress would do with one request.

    Attributes:
        passes: the request leaves the sandbox (a rule lets it through, or the network is
            open); False when refused or when there is no network.
        via: what lets it through, for a reason shown to people ("the egress rule 'pd'
            (credential)"); "" when it does not pass.
        refused: why the gateway refuses it ("DELETE is not allowed to prom (only GET,
            HEAD)"); "" when it passes or there is no gateway to refuse it.
    """

    passes: bool
    via: str = ""
    refused: str = ""


class Reach(Protocol):
    """What a session's sandbox can reach (see the module docstring)."""

    @property
    def change(self) -> str | None:
        """Why something the sandbox runs could change an outside system ("the egress rule
        'pd' allows POST"), or None when nothing it reaches can be changed."""
        ...

    def route(self, method: str, url: str) -> Route:
        """What the egress does with a ``method`` (upper case) request to absolute ``url``."""
        ...


@dataclass(frozen=True)
class NoNetwork:
    """A sandbox without a network: nothing leaves it."""

    @property
    def change(self) -> str | None:
        """Nothing outside can be changed."""
        return None

    def route(self, method: str, url: str) -> Route:
        """No request leaves."""
        return Route(passes=False)


@dataclass(frozen=True)
class OpenNetwork:
    """A sandbox on the host's network (``WARROOM_SANDBOX_NETWORK=host``): everything leaves."""

    @property
    def change(self) -> str | None:
        """Anything reachable from the host can be changed."""
        return "the sandbox is on the host's network"

    def route(self, method: str, url: str) -> Route:
        """Every request leaves, unchecked."""
        return Route(passes=True, via="the host's network")


class EgressReach:
    """The reach of a sandbox behind the egress gateway holding ``rules``."""

    def __init__(self, rules: Rules) -> None:
        """Args:
        rules: the gateway's rules (``sandbox_client.gateway.Rules``), as it enforces them.
        """
        self._rules = Rules(tuple(r.model_copy(update={"channels": ()}) for r in rules.rules))
        self._change = _why_changing(self._rules)

    @property
    def change(self) -> str | None:
        """The first rule that lets a change out, named with why; None when none does."""
        return self._change

    def route(self, method: str, url: str) -> Route:
        """The gateway's decision for the request (host, port, path prefix, method)."""
        parts = urlsplit(url)
        try:
            host, port = (parts.hostname or "").lower(), parts.port
        except ValueError:
            return Route(passes=False, refused=f"{url} has no valid port")
        if not host or parts.scheme not in ("http", "https"):
            return Route(passes=False, refused=f"{url} is not an http(s) URL")
        port = port or (443 if parts.scheme == "https" else 80)
        if parts.scheme == "https":  # a tunnel passes HTTPS unseen: any method, any path
            tunnel = next((r for r in self._rules.for_host(host, port) if r.tunnel), None)
            if tunnel is not None:
                return Route(passes=True, via=f"the egress rule {tunnel.name!r} (a tunnel)")
        try:
            path = normalise(parts.path or "/")
        except AmbiguousPath as exc:  # the gateway refuses it the same way
            return Route(passes=False, refused=f"{url}: {exc.reason}")
        line = RequestLine(
            method=method,
            host=host,
            port=port,
            path=path,
            channel_id=None,
            scheme=parts.scheme,  # a credential rule passes https only, as the gateway decides
        )
        decision = self._rules.decide(line)
        if decision.outcome is Outcome.BLOCKED or decision.rule is None:
            return Route(passes=False, refused=decision.reason)
        kind = " (credential)" if decision.rule.inject is not None else ""
        return Route(passes=True, via=f"the egress rule {decision.rule.name!r}{kind}")


def _why_changing(rules: Rules) -> str | None:
    # A credential rule that allows only GET and HEAD lets no change out: the gateway judges
    # each request's effective method (overrides included) and lets a changing one through
    # any rule only from an approved call's own process (§13).
    for rule in rules.rules:
        if rule.tunnel:
            return f"the egress rule {rule.name!r} tunnels HTTPS (any method)"
        changing = [m for m in rule.methods if m not in READ_ONLY_METHODS]
        if changing:
            return f"the egress rule {rule.name!r} allows {', '.join(changing)}"
    return None
