"""Which alerting app wrote a Slack message, and what it says: status, identity, title.

One recogniser per integration, tried in order; the first that knows the message wins,
``generic`` takes the rest. Each reads the integration's own markers:

- Alertmanager's Slack receiver: the default title ``[FIRING:<n>] <group label values>
  (<other common labels>)`` or ``[RESOLVED] …`` (``default.tmpl``, ``__subject``) and a
  title link to ``/#/alerts``; the problem is its group (the values before ``(``);
- Grafana alerting: the same ``[FIRING:<n>]`` subject, a ``Grafana v…`` footer or an
  ``/alerting/`` link; ``Labels:`` lines (`` - name = value``) become labels;
- PagerDuty's Slack app: an ``/incidents/<ID>`` link and a ``Status`` (Triggered,
  Acknowledged, Resolved); the problem is the incident;
- Datadog: ``[Triggered on {scope}] …``, ``[Recovered] …`` (also ``Warn``, ``No Data``,
  ``Re-Triggered``…) and a ``/monitors/<id>`` link; the problem is monitor + scope;
- Sentry: an ``/issues/<id>/`` link (issue alerts) or ``Critical:``/``Warning:``/
  ``Resolved:`` metric-alert titles; the problem is the issue (or the alert rule);
- Opsgenie: ``#<tinyId>: <message>`` and an ``/alert/detail/<id>`` link; "closed" in
  its pretext resolves; the problem is the alert id;
- generic: the sender and the title with numbers and status words taken out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bot.alerts.model import AlertStatus
from bot.alerts.slack_view import MessageView

FIRING, RESOLVED = AlertStatus.FIRING, AlertStatus.RESOLVED


@dataclass(frozen=True)
class Recognised:
    """What a recogniser read: ``source`` (``alertmanager``…), ``identity`` (the
    problem's key within the source), the alert's status and title, and what else it
    found (severity, service, labels)."""

    source: str
    identity: str
    status: AlertStatus
    title: str
    severity: str = ""
    service: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


_SUBJECT = re.compile(r"^\[(FIRING|RESOLVED)(?::\d+)?(?:,\s*RESOLVED:\d+)?\]\s*(.*)$", re.I)
_SEVERITIES = re.compile(r"\b(critical|error|warning|warn|info|page|P[1-5]|sev-?\d)\b", re.I)
_LABEL_LINE = re.compile(r"^\s*-\s*([A-Za-z_][\w.]*)\s*=\s*(.*?)\s*$")
_BULLET_LABEL = re.compile(r"^\s*[•-]\s*([A-Za-z_][\w.]*):\s*`?([^`]*?)`?\s*$")
_DD_TITLE = re.compile(
    r"^\[?((?:Re-)?Triggered|Recovered(?: from \w[\w ]*)?|(?:Re-)?Warn|(?:Re-)?No Data|Renotify)"
    r"(?: on (\{[^}]*\}|[^\]]*))?\]?:?\s*(.*)$",
    re.I,
)
_DD_MONITOR = re.compile(r"/monitors/(\d+)")
_PD_INCIDENT = re.compile(r"pagerduty[^/]*/incidents/([A-Z0-9]+)", re.I)
_PD_NUMBER = re.compile(r"^\[?#\d+\]?:?\s*")
_SENTRY_ISSUE = re.compile(r"/issues/(\d+)")
_SENTRY_RULE = re.compile(r"/alerts/rules/details/(\d+)|/alerts/rules/[^/]+/(\d+)")
_SENTRY_METRIC = re.compile(r"^(Critical|Warning|Resolved):\s*(.*)$", re.I)
_OG_ALERT = re.compile(r"opsgenie[^/]*/alert/detail/([^/?#]+)", re.I)
_OG_TITLE = re.compile(r"^#(\d+):\s*(.*)$")
_RESOLVED_WORD = re.compile(r"^\W*(resolved|recovered|ok|closed|cleared)\b", re.I)
_STATUS_WORD = re.compile(
    r"\b(firing|triggered|resolved|recovered|ok|closed|alert|warning|critical)\b", re.I
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def _alertmanager_like(view: MessageView) -> Recognised | None:
    subject = _SUBJECT.match(view.title)
    if subject is None:
        return None
    grafana = any(f.lower().startswith("grafana") for f in view.footers) or (
        "grafana" in view.sender.name.lower() or any("/alerting/" in url for _, url in view.links)
    )
    status = RESOLVED if subject.group(1).upper() == "RESOLVED" else FIRING
    rest = subject.group(2).strip()
    group, _, common = rest.partition(" (")
    labels = _label_lines(view.content)
    severity = labels.get("severity") or _first_severity(common) or view.field("severity")
    service = labels.get("service") or labels.get("job") or view.field("service", "job")
    return Recognised(
        "grafana" if grafana else "alertmanager",
        group.strip() or rest,
        status,
        rest,
        severity=severity,
        service=service,
        labels=labels,
    )


def _datadog(view: MessageView) -> Recognised | None:
    monitor = view.link_matching(_DD_MONITOR)
    found = _DD_TITLE.match(view.title)
    if found is None or (monitor is None and "datadog" not in view.sender.name.lower()):
        return None
    word, scope, rest = found.group(1), (found.group(2) or "").strip("{} "), found.group(3)
    status = RESOLVED if word.lower().startswith("recovered") else FIRING
    identity = f"monitor {monitor.group(1) if monitor else rest}" + (f" {scope}" if scope else "")
    service = re.search(r"service:([\w.-]+)", view.content)
    return Recognised(
        "datadog",
        identity,
        status,
        rest or view.title,
        severity=_first_severity(rest) or view.field("priority", "severity"),
        service=service.group(1) if service else view.field("service"),
    )


def _pagerduty(view: MessageView) -> Recognised | None:
    incident = view.link_matching(_PD_INCIDENT)
    if incident is None:
        return None
    said = (view.field("status") or " ".join(view.pretexts) or view.title).lower()
    status = RESOLVED if "resolved" in said else FIRING
    return Recognised(
        "pagerduty",
        f"incident {incident.group(1)}",
        status,
        _PD_NUMBER.sub("", view.title),
        severity=view.field("urgency", "priority", "severity"),
        service=view.field("service"),
    )


def _sentry(view: MessageView) -> Recognised | None:
    issue = view.link_matching(_SENTRY_ISSUE)
    sentry = "sentry" in view.sender.name.lower() or any("sentry" in u for _, u in view.links)
    if not sentry:
        return None
    metric = _SENTRY_METRIC.match(view.title)
    if issue is not None and metric is None:
        resolved = "resolved" in " ".join(view.pretexts).lower()
        return Recognised(
            "sentry", f"issue {issue.group(1)}", RESOLVED if resolved else FIRING, view.title,
            severity=view.field("level", "severity"),
            service=view.field("project"),
        )  # fmt: skip
    if metric is None:
        return None
    rule = view.link_matching(_SENTRY_RULE)
    name = metric.group(2)
    identity = f"rule {next(g for g in rule.groups() if g)}" if rule else f"metric {name}"
    status = RESOLVED if metric.group(1).lower() == "resolved" else FIRING
    severity = "" if status is RESOLVED else metric.group(1).lower()
    return Recognised("sentry", identity, status, name, severity=severity)


def _opsgenie(view: MessageView) -> Recognised | None:
    alert = view.link_matching(_OG_ALERT)
    if alert is None:
        return None
    said = " ".join(view.pretexts).lower()
    status = RESOLVED if re.search(r"\bclosed\b", said) else FIRING
    titled = _OG_TITLE.match(view.title)
    return Recognised(
        "opsgenie",
        f"alert {alert.group(1)}",
        status,
        titled.group(2) if titled else view.title,
        severity=view.field("priority"),
        service=view.field("entity", "service"),
    )


def _generic(view: MessageView) -> Recognised:
    title = view.title or view.content.split("\n", 1)[0] or "(no text)"
    status = RESOLVED if _RESOLVED_WORD.match(title) else FIRING
    shape = _NUMBER.sub("#", _STATUS_WORD.sub("", title.lower()))
    shape = re.sub(r"[^\w#.-]+", " ", shape)
    sender = view.sender.app_id or view.sender.bot_id or view.sender.name
    return Recognised(
        "generic",
        f"{sender} {' '.join(shape.split())}",
        status,
        title,
        severity=view.field("severity", "priority", "urgency") or _first_severity(title),
        service=view.field("service"),
    )


RECOGNISERS: tuple[Callable[[MessageView], Recognised | None], ...] = (
    _alertmanager_like,
    _pagerduty,
    _opsgenie,
    _sentry,
    _datadog,
)


def recognise(view: MessageView) -> Recognised:
    """The first recogniser's reading of ``view``; ``generic`` when none knows it."""
    for recogniser in RECOGNISERS:
        found = recogniser(view)
        if found is not None:
            return found
    return _generic(view)


def _label_lines(text: str) -> dict[str, str]:
    """`` - name = value`` lines under ``Labels:`` (Grafana's default message) and
    ``• name: value`` lines under ``Details:``/``Labels:`` (a common Alertmanager text
    template), first wins."""
    labels: dict[str, str] = {}
    section = ""
    for line in text.splitlines():
        head = line.strip().strip("*")
        if head.endswith(":") and not line.startswith(" "):
            section = head.rstrip(":").lower()
            continue
        found = _LABEL_LINE.match(line) or _BULLET_LABEL.match(line)
        if found and section in ("labels", "details"):
            labels.setdefault(found.group(1), found.group(2))
    return labels


def _first_severity(text: str) -> str:
    found = _SEVERITIES.search(text)
    return found.group(1).lower() if found else ""
