"""Who may post alerts: a bearer token, or the source's own HMAC signature.

- Every source: ``Authorization: Bearer <WARROOM_ALERT_TOKEN>`` (Alertmanager's
  ``http_config.authorization``, Grafana's webhook "Authorization header", a Datadog
  webhook's custom headers, or any sender of the generic form).
- PagerDuty v3 webhooks: ``X-PagerDuty-Signature: v1=<hex HMAC-SHA256 of the raw body,
  keyed with the subscription's signing secret>``, several comma-separated during a
  secret rotation; one match is enough (PagerDuty's "Verifying Signatures" page).

Comparisons are constant-time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

PAGERDUTY_SIGNATURE = "X-PagerDuty-Signature"


@dataclass(frozen=True)
class AlertAuth:
    """The secrets alerts are checked against ("" : that way is off)."""

    token: str = ""
    pagerduty_secret: str = ""

    @property
    def configured(self) -> bool:
        """Whether any way in is set up (otherwise every request is refused)."""
        return bool(self.token or self.pagerduty_secret)

    def allows(self, source: str, headers: Mapping[str, str], body: bytes) -> bool:
        """Whether the request carries the token or a valid signature for ``source``.

        >>> auth = AlertAuth(token="s3cret")
        >>> auth.allows("generic", {"Authorization": "Bearer s3cret"}, b"{}")
        True
        >>> auth.allows("generic", {"Authorization": "Bearer wrong"}, b"{}")
        False
        """
        if self.token and _bearer(headers.get("Authorization", ""), self.token):
            return True
        if source == "pagerduty" and self.pagerduty_secret:
            return pagerduty_signed(
                headers.get(PAGERDUTY_SIGNATURE, ""), body, self.pagerduty_secret
            )
        return False


def pagerduty_signature(body: bytes, secret: str) -> str:
    """The ``v1=<hex>`` signature PagerDuty sends for ``body`` (tests sign with it)."""
    return "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def pagerduty_signed(header: str, body: bytes, secret: str) -> bool:
    """Whether one of the header's ``v1=`` signatures is ``body``'s."""
    expected = pagerduty_signature(body, secret)
    return any(
        hmac.compare_digest(part.strip(), expected) for part in header.split(",") if part.strip()
    )


def _bearer(header: str, token: str) -> bool:
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )
