"""What a session's start searches for: its first text and an alert's labels, as a
``RecallQuery`` (services weigh more than prose).

Alert intake may hand labels over (``labels``, ``services``); labels written in the text
itself (``service=checkout-api``, ``job: api``, as Alertmanager's Slack template prints
them) count too, and so do hyphenated names in prose (``checkout-api``), which is how
people name services.

>>> q = recall_query("[FIRING] HighErrorRate service=checkout-api: 500s on /pay")
>>> q.services
('checkout-api',)
>>> q.words[:3]
('firing', 'higherrorrate', 'service')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from harness.recall.summary import SERVICE_LABELS
from memory_store import RecallQuery

MAX_TEXT_CHARS = 4_000
"""Only the start of a long first message is searched (a pasted log adds noise, not recall)."""
_LABEL = re.compile(
    r"\b(" + "|".join(SERVICE_LABELS) + r"|alertname)\s*[=:]\s*[\"']?([A-Za-z0-9_.:/-]+)",
    re.IGNORECASE,
)
_NAME = re.compile(r"\b[a-z0-9]+(?:[-_][a-z0-9]+)+\b")
_MENTION = re.compile(r"<[@#!][^>]*>")


def labels_in(text: str) -> dict[str, str]:
    """``name=value`` or ``name: value`` pairs of known alert labels in ``text``.

    >>> labels_in("alertname=PoolExhausted service: checkout-api")
    {'alertname': 'PoolExhausted', 'service': 'checkout-api'}
    """
    found: dict[str, str] = {}
    for name, value in _LABEL.findall(text):
        found.setdefault(name.lower(), value.rstrip(".,:;"))
    return found


def recall_query(
    text: str,
    labels: Mapping[str, str] | None = None,
    services: Sequence[str] = (),
) -> RecallQuery:
    """The query for a session whose first message is ``text`` (an alert's ``labels`` and
    ``services`` optional)."""
    text = _MENTION.sub(" ", text[:MAX_TEXT_CHARS])
    every = {**labels_in(text), **{k.lower(): v for k, v in (labels or {}).items()}}
    named = [v for k, v in every.items() if k in SERVICE_LABELS]
    prose_names = _NAME.findall(text.lower())
    all_services = tuple(
        dict.fromkeys(s.strip().lower() for s in (*services, *named, *prose_names) if s.strip())
    )
    extra = " ".join(f"{k} {v}" for k, v in every.items())
    words = tuple(dict.fromkeys(re.findall(r"[a-z0-9]+", f"{text} {extra}".lower())))
    return RecallQuery(services=all_services, words=words)
