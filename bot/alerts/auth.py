"""Who may post alerts: a bearer token, or the source's own HMAC signature.

- Every source: ``Authorization: Bearer <WARROOM_ALERT_TOKEN>`` (Alertmanager's
  ``http_config.authorization``, Grafana's webhook "Authorization header", a Datadog
  webhook's custom headers, or any sender of the generic form).
- PagerDuty v3 webhooks: ``X-PagerDuty-Signature: v1=<hex HMAC-SHA256 of the raw body,
  keyed with the subscription's signing secret>``, several comma-separated during a
  secret rotation; one match is enough (PagerDuty's "Verifying Signatures" page).

Comparisons are constant-time (``hmac.compare_digest``) over SHA-256 digests of the bytes
given and expected, so neither the token's contents nor its length leak through timing, and
any header bytes (not UTF-8, not ASCII) are compared, never an error.
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

    def may_pass(self, source: str, headers: Mapping[str, str]) -> bool:
        """Whether the request may yet be allowed once its body is read: it carries the
        token, or a signature header where one is checked (so a request with neither is
        refused before its body is read).

        >>> auth = AlertAuth(token="s3cret", pagerduty_secret="pd")
        >>> auth.may_pass("generic", {"X-PagerDuty-Signature": "v1=00"})
        False
        >>> auth.may_pass("pagerduty", {"X-PagerDuty-Signature": "v1=00"})
        True
        """
        if self.token and _bearer(headers.get("Authorization", ""), self.token):
            return True
        return (
            source == "pagerduty"
            and bool(self.pagerduty_secret)
            and (PAGERDUTY_SIGNATURE in headers)
        )


def pagerduty_signature(body: bytes, secret: str) -> str:
    """The ``v1=<hex>`` signature PagerDuty sends for ``body`` (tests sign with it)."""
    return "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def pagerduty_signed(header: str, body: bytes, secret: str) -> bool:
    """Whether one of the header's ``v1=`` signatures is ``body``'s.

    >>> body = b'{"event": {}}'
    >>> pagerduty_signed("v1=00, " + pagerduty_signature(body, "s"), body, "s")
    True
    >>> pagerduty_signed("v1=\u00e9", body, "s")
    False
    """
    expected = pagerduty_signature(body, secret)
    return any(_same(part.strip(), expected) for part in header.split(",") if part.strip())


def _bearer(header: str, token: str) -> bool:
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and _same(given.strip(), token)


def _same(given: str, expected: str) -> bool:
    """``given == expected`` in constant time whatever their lengths; ``given`` may hold
    any character (aiohttp decodes header bytes that are not UTF-8 as surrogates)."""
    return hmac.compare_digest(_digest(given), _digest(expected))


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
