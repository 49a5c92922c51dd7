"""An incident's structured summary, ``/incident/summary.md``: its format, parsing, and the
draft the harness writes when a turn ends and nobody wrote one (docs/architecture.md §17).

The file is Markdown a person or the agent edits like any other note::

    # checkout-api 500s after a deploy shrank the DB pool

    - Services: checkout-api, postgres
    - Symptoms: HTTP 500s on POST /checkout; pool exhausted
    - Root cause: the 14:02 deploy set max_pool_size to 5
    - Fix: rolled back config/db.yaml (max_pool_size 50)
    - Links: /incident/postmortem.md, https://…

A field's value may go on over the following lines (until the next field, heading or
blank line). Unknown lines are kept in the file and ignored by the index.

>>> s = parse_summary(render_summary(IncidentSummary("t", ("a-b",), "s", "c", "f", ("l",))))
>>> s == IncidentSummary("t", ("a-b",), "s", "c", "f", ("l",))
True
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from memory_store import IncidentSummary

SUMMARY_PATH = "/summary.md"
"""The summary's path under ``/incident``."""
DRAFT_ACTOR = "warroom-recall"
"""The actor of a drafted summary: a file last written by anyone else is never redrafted."""
FIELDS = {
    "services": "Services",
    "symptoms": "Symptoms",
    "root cause": "Root cause",
    "fix": "Fix",
    "links": "Links",
}
MAX_FIELD_CHARS = 600
MAX_TITLE_CHARS = 120
_FIELD = re.compile(
    r"^\s*[-*]?\s*\**(services|symptoms|root[ _-]?cause|fix|links)\**\s*:\s*(.*)$", re.IGNORECASE
)
_SPLIT = re.compile(r"[,\s]+")
_MENTION = re.compile(r"<[@#!][^>]*>")
_FIX_WORDS = re.compile(
    r"\b(fix|fixed|roll(ed)? ?back|revert(ed)?|restart(ed)?|scal(e|ed)|rais(e|ed)|"
    r"increas(e|ed)|resolv(e|ed)|mitigat(e|ed))\b",
    re.IGNORECASE,
)


def parse_summary(text: str) -> IncidentSummary:
    """The summary in ``text`` (missing fields empty; the title from the first ``#``
    heading, else the first non-blank line)."""
    title = ""
    values: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        field = _FIELD.match(line)
        if field is not None:
            current = re.sub(r"[ _-]+", " ", field.group(1).lower())
            values.setdefault(current, []).append(field.group(2).strip())
        elif stripped.startswith("#"):
            current = None
            if not title:
                title = stripped.lstrip("#").strip()
        elif not stripped:
            current = None
        elif current is not None:
            values[current].append(stripped)
        elif not title:
            title = stripped
    joined = {k: " ".join(v for v in vs if v)[:MAX_FIELD_CHARS] for k, vs in values.items()}
    return IncidentSummary(
        title=title[:MAX_TITLE_CHARS],
        services=_names(joined.get("services", "")),
        symptoms=joined.get("symptoms", ""),
        root_cause=joined.get("root cause", ""),
        fix=joined.get("fix", ""),
        links=tuple(x for x in _SPLIT.split(joined.get("links", "")) if x.strip(",")),
    )


def _names(text: str) -> tuple[str, ...]:
    return tuple(
        dict.fromkeys(n.strip("`'\".").lower() for n in _SPLIT.split(text) if n.strip("`'\"."))
    )


def render_summary(summary: IncidentSummary, note: str = "") -> str:
    """``summary`` as the file's text (``note``: a last paragraph, e.g. that it is a draft)."""
    lines = [
        f"# {summary.title or '(untitled incident)'}",
        "",
        f"- Services: {', '.join(summary.services)}",
        f"- Symptoms: {summary.symptoms}",
        f"- Root cause: {summary.root_cause}",
        f"- Fix: {summary.fix}",
        f"- Links: {', '.join(summary.links)}",
    ]
    if note:
        lines += ["", note]
    return "\n".join(line.rstrip() for line in lines) + "\n"


DRAFT_NOTE = (
    "_Drafted by Warroom from the first request, the alert's services, the last answer and "
    "the postmortem (if any). Correct any line with Edit: the search that finds past "
    "incidents for new ones reads this file._"
)


def one_line(text: str, max_chars: int) -> str:
    """``text`` on one line (Slack mentions and Markdown markers dropped), cut to
    ``max_chars`` with an ellipsis.

    >>> one_line("<@U1> **checkout** 500s\\nsince 14:02", 20)
    'checkout 500s since…'
    """
    flat = " ".join(_MENTION.sub("", text).replace("**", "").replace("`", "").split())
    return flat if len(flat) <= max_chars else flat[: max_chars - 1].rstrip() + "…"


def _section(markdown: str, names: Sequence[str]) -> str:
    """The text under the first ``## <name>`` heading of ``markdown`` (one of ``names``)."""
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#") and line.lstrip("#").strip().lower() in names:
            body: list[str] = []
            for rest in lines[i + 1 :]:
                if rest.startswith("#"):
                    break
                body.append(rest.strip().lstrip("-* ").strip())
            return " ".join(b for b in body if b)
    return ""


def draft_summary(
    request: str,
    answer: str,
    *,
    services: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    postmortem: str | None = None,
    links: Sequence[str] = (),
) -> IncidentSummary:
    """A summary made without a model: title and symptoms from the first ``request``;
    services from the alert's; root cause and fix from the postmortem's *Root cause* and
    *Resolution* sections when there is one, else from the ``answer`` (its first line, and
    its first line that names a remedy).

    >>> d = draft_summary("<@U1> checkout-api 500s", "Pool exhausted.\\nRolled back db.yaml.",
    ...                   services=["checkout-api"])
    >>> d.title, d.services, d.root_cause, d.fix
    ('checkout-api 500s', ('checkout-api',), 'Pool exhausted.', 'Rolled back db.yaml.')
    """
    cause = fix = ""
    if postmortem:
        cause = _section(postmortem, ("root cause",))
        fix = _section(postmortem, ("resolution", "fix"))
    answer_lines = [one_line(line, MAX_FIELD_CHARS) for line in answer.splitlines()]
    answer_lines = [line for line in answer_lines if line.strip("#-* ")]
    if not cause and answer_lines:
        cause = answer_lines[0].strip("#-* ")
    if not fix:
        fix = next((ln.strip("#-* ") for ln in answer_lines if _FIX_WORDS.search(ln)), "")
    label_services = [v for k, v in (labels or {}).items() if k in SERVICE_LABELS]
    return IncidentSummary(
        title=one_line(request.splitlines()[0] if request.strip() else "", MAX_TITLE_CHARS),
        services=_names(" ".join([*services, *label_services])),
        symptoms=one_line(request, 300),
        root_cause=one_line(cause, MAX_FIELD_CHARS),
        fix=one_line(fix, MAX_FIELD_CHARS),
        links=tuple(links),
    )


SERVICE_LABELS = ("service", "app", "job", "application", "component", "deployment", "container")
"""Alert label names whose values name a service (Prometheus/Alertmanager conventions)."""
