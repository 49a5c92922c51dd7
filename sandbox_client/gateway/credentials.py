"""Secrets by reference: resolved on the gateway's host, added to requests, scrubbed from replies.

The gateway resolves every secret a rule names once, when it starts (so ``doctor`` and the start
fail early on a missing one, and a request never touches the disk); rotating a secret means
restarting the gateway. The values never leave this module except into an upstream request.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sandbox_client.gateway.rules import Basic, Bearer, Header, Injection, Query, Rule, SecretRef

REDACTED = b"[secret removed by the warroom gateway]"


class MissingSecret(LookupError):
    """A rule names a secret that is not there (``where``: ``env NAME`` or ``file PATH``)."""

    def __init__(self, rule: str, where: str) -> None:
        super().__init__(f"rule {rule}: the secret ({where}) is missing or empty")
        self.rule = rule
        self.where = where


@dataclass(frozen=True)
class Injected:
    """What one credential rule adds to a request, and the byte strings to scrub from replies."""

    headers: tuple[tuple[str, str], ...]
    query: tuple[tuple[str, str], ...]
    scrub: tuple[bytes, ...]


def resolve(ref: SecretRef, environ: Mapping[str, str], *, rule: str) -> str:
    """The secret's value.

    Raises:
        MissingSecret: the variable is unset or empty, or the file is missing or empty.
    """
    if ref.env is not None:
        value = environ.get(ref.env, "")
    else:
        try:
            value = Path(str(ref.file)).read_text(encoding="utf-8").strip()
        except OSError:
            value = ""
    if not value:
        raise MissingSecret(rule, ref.describe())
    return value


def prepare(rules: Sequence[Rule], environ: Mapping[str, str]) -> dict[str, Injected]:
    """Resolve every credential rule's secret: rule name → what to inject.

    Raises:
        MissingSecret: the first secret that is missing.
    """
    return {
        rule.name: _injected(rule.inject, environ, rule.name)
        for rule in rules
        if rule.inject is not None
    }


def _injected(inject: Injection, environ: Mapping[str, str], rule: str) -> Injected:
    match inject:
        case Bearer(token=ref):
            value = resolve(ref, environ, rule=rule)
            return Injected((("authorization", f"Bearer {value}"),), (), _forms(value))
        case Basic(username=user, password=ref):
            value = resolve(ref, environ, rule=rule)
            encoded = base64.b64encode(f"{user}:{value}".encode()).decode()
            scrub = (*_forms(value), encoded.encode())
            return Injected((("authorization", f"Basic {encoded}"),), (), scrub)
        case Header(name=name, value=ref):
            value = resolve(ref, environ, rule=rule)
            return Injected(((name.lower(), value),), (), _forms(value))
        case Query(name=name, value=ref):
            value = resolve(ref, environ, rule=rule)
            return Injected((), ((name, value),), _forms(value))
    raise AssertionError(f"unknown injection {inject!r}")


def _forms(value: str) -> tuple[bytes, ...]:
    """The ways a secret may come back: as is, URL-encoded, base64."""
    forms = {value.encode(), quote(value, safe="").encode(), base64.b64encode(value.encode())}
    return tuple(sorted(f for f in forms if len(f) >= 4))


class Scrubber:
    """Replaces secrets in a byte stream, across chunk boundaries.

    It holds back the last ``longest - 1`` bytes of each chunk until the next one (or
    ``flush``), so a secret split between two chunks is still found.

    >>> s = Scrubber([b"hunter22"])
    >>> s.feed(b"pass=hun") + s.feed(b"ter22; ok") + s.flush()
    b'pass=[secret removed by the warroom gateway]; ok'
    """

    def __init__(self, secrets: Sequence[bytes]) -> None:
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._keep = max((len(s) for s in self._secrets), default=1) - 1
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        """Scrubbed bytes that are safe to send now."""
        if not self._secrets:
            return chunk
        data = self._replace(self._held + chunk)
        if len(data) <= self._keep:
            self._held = data
            return b""
        cut = len(data) - self._keep
        self._held = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        """The bytes held back, scrubbed."""
        data, self._held = self._replace(self._held), b""
        return data

    def text(self, value: str) -> str:
        """A whole string (a header value) scrubbed."""
        return self._replace(value.encode("latin-1", "replace")).decode("latin-1")

    def whole(self, value: bytes) -> bytes:
        """A whole value (a header's) scrubbed."""
        return self._replace(value) if self._secrets else value

    def _replace(self, data: bytes) -> bytes:
        for secret in self._secrets:
            data = data.replace(secret, REDACTED)
        return data
