"""Secrets by reference: resolved on the gateway's host, added to requests (``scrubber`` removes
them from replies).

The gateway resolves every secret a rule names once, when it starts (so ``doctor`` and the start
fail early on a missing one, and a request never touches the disk); rotating a secret means
restarting the gateway. The values never leave this module except into an upstream request.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox_client.gateway.rules import Basic, Bearer, Header, Injection, Query, Rule, SecretRef
from sandbox_client.gateway.scrubber import SecretForms


class MissingSecret(LookupError):
    """A rule names a secret that is not there (``where``: ``env NAME`` or ``file PATH``)."""

    def __init__(self, rule: str, where: str) -> None:
        super().__init__(f"rule {rule}: the secret ({where}) is missing or empty")
        self.rule = rule
        self.where = where


@dataclass(frozen=True)
class Injected:
    """What one credential rule adds to a request, and the secret's forms to scrub from replies
    (compiled once, when the gateway starts)."""

    headers: tuple[tuple[str, str], ...]
    query: tuple[tuple[str, str], ...]
    scrub: SecretForms


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
            scrub = SecretForms.of([value.encode(), encoded.encode()])
            return Injected((("authorization", f"Basic {encoded}"),), (), scrub)
        case Header(name=name, value=ref):
            value = resolve(ref, environ, rule=rule)
            return Injected(((name.lower(), value),), (), _forms(value))
        case Query(name=name, value=ref):
            value = resolve(ref, environ, rule=rule)
            return Injected((), ((name, value),), _forms(value))
    raise AssertionError(f"unknown injection {inject!r}")


def _forms(value: str) -> SecretForms:
    return SecretForms.of([value.encode()])
