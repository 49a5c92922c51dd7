"""What the model is told about the systems it can reach through the egress gateway (§11).

The section is part of the system prompt: it is built from the rules, which a deployment
reads once at start, so its bytes never change between requests (the prompt cache holds).
No secret appears in it: the model learns that a credential is added for it, never the
credential.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Service:
    """One reachable system: ``base_url`` and ``description`` come from its egress rule;
    ``methods`` are the HTTP methods the rule lets through; ``credential`` says whether the
    gateway adds a credential; ``channels`` are the Slack channel ids that may use it
    (empty: every channel)."""

    name: str
    base_url: str
    description: str
    methods: tuple[str, ...]
    credential: bool
    channels: tuple[str, ...] = ()

    def serves(self, channel_id: str | None) -> bool:
        """Whether a session of ``channel_id`` may use this system."""
        return not self.channels or channel_id in self.channels


def services_section(services: Sequence[Service], channel_id: str | None = None) -> str:
    """The system prompt's section on the systems a session of ``channel_id`` can reach
    ('' when there are none), sorted by name.

    >>> prom = Service("prom", "https://prom.internal", "metrics", ("GET",), credential=True)
    >>> print(services_section([prom]))
    # Systems you can reach
    Your sandbox reaches the network only through Warroom's egress gateway, and only these \
systems. Use them from Bash (curl, promtool, kubectl …) with no credentials: the gateway adds \
them where needed. Anything else is refused with an HTTP 403 that says why; tell the team if \
you need a system that is not listed.
    - prom: https://prom.internal (GET; credential added by the gateway): metrics
    >>> services_section([Service("pd", "https://pd", "", ("GET",), False, ("C1",))], "C2")
    ''
    """
    listed = [s for s in services if s.base_url and s.serves(channel_id)]
    if not listed:
        return ""
    lines = [
        "# Systems you can reach",
        "Your sandbox reaches the network only through Warroom's egress gateway, and only these "
        "systems. Use them from Bash (curl, promtool, kubectl …) with no credentials: the gateway "
        "adds them where needed. Anything else is refused with an HTTP 403 that says why; tell the "
        "team if you need a system that is not listed.",
    ]
    for service in sorted(listed, key=lambda s: s.name):
        how = ", ".join(service.methods)
        if service.credential:
            how += "; credential added by the gateway"
        detail = f": {service.description}" if service.description else ""
        lines.append(f"- {service.name}: {service.base_url} ({how}){detail}")
    return "\n".join(lines)
