"""Each alert source's webhook body, parsed into ``Alert`` values (``parse``).

Shapes (each source's public documentation):

- ``alertmanager``: Prometheus Alertmanager's webhook, ``version`` "4": one
  notification per alert group (``groupKey``, ``status``, ``commonLabels``,
  ``commonAnnotations``, ``externalURL``, ``alerts[]`` with ``fingerprint``,
  ``labels``, ``annotations``, ``startsAt``, ``endsAt``, ``generatorURL``). One
  ``Alert`` per notification, keyed by ``groupKey``: the group is the problem.
- ``grafana``: Grafana alerting's webhook contact point, Alertmanager's shape plus
  ``orgId``, ``title``, ``message``, ``state`` and per alert ``values``,
  ``dashboardURL``, ``panelURL``, ``silenceURL``; keyed by ``groupKey`` (else the
  first alert's ``fingerprint``).
- ``pagerduty``: PagerDuty Webhooks v3: ``{"event": {"id", "event_type"
  ("incident.triggered", "incident.resolved", …), "occurred_at", "data": {"id",
  "type": "incident", "title", "status", "urgency", "service": {"summary"},
  "html_url", "incident_key", "priority": {"summary"}}}}``; keyed by the incident id;
  ``event.id`` is the delivery id. ``incident.triggered`` and ``incident.reopened`` fire,
  ``incident.resolved`` resolves; other events (acknowledged, annotated…) are not alerts.
- ``datadog``: Datadog's Webhooks integration sends the payload template you write;
  its default (``id``, ``title``, ``body``, ``event_type``, ``date``, ``last_updated``,
  ``org``) plus, when added to the template, ``aggreg_key`` ($AGGREG_KEY),
  ``alert_transition`` ($ALERT_TRANSITION: "Triggered", "Recovered"…), ``alert_id``,
  ``alert_priority``, ``alert_scope``, ``hostname``, ``link``, ``tags``.
- ``generic``: ``{"key", "status": "firing"|"resolved", "title", "severity",
  "service", "labels", "fields", "links": [{"label", "url"}], "starts_at",
  "ends_at", "id"}`` (``title`` and ``key`` required).

Every failure is ``BadPayload`` with a message a sender can act on (400).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from bot.alerts.model import Alert, AlertStatus, key_of

SOURCES = ("alertmanager", "grafana", "pagerduty", "datadog", "generic")
MAX_BODY_BYTES = 1_000_000
MAX_DEPTH = 32
"""Deepest nesting of arrays and objects a body may have (the sources' own go 5 deep)."""
_FRACTION = re.compile(r"\.\d+")  # Go writes nanoseconds; Python reads at most 6 digits


class BadPayload(ValueError):
    """The body is not the source's webhook shape (the message says what is wrong)."""


def parse(source: str, body: bytes, *, delivery: str) -> list[Alert]:
    """The alerts in ``body`` from ``source``; ``delivery`` identifies the request
    (a retry repeats it) when the payload carries no id of its own.

    Raises:
        BadPayload: not JSON (a number over Python's 4,300 digits, nesting too deep for
            the decoder or deeper than ``MAX_DEPTH``: also), not an object, or missing
            what the source always sends.
        KeyError: ``source`` is not one of ``SOURCES``.
    """
    parser = _PARSERS[source]
    try:
        data = json.loads(body)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise BadPayload(f"the body is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise BadPayload(f"the body is nested deeper than {MAX_DEPTH} levels") from exc
    if not isinstance(data, dict):
        raise BadPayload("the body must be a JSON object")
    if _depth(data) > MAX_DEPTH:
        raise BadPayload(f"the body is nested deeper than {MAX_DEPTH} levels")
    try:
        return parser(data, delivery)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, BadPayload):
            raise
        raise BadPayload(f"not a {source} webhook body: {_why(exc)}") from exc


def _depth(data: Any) -> int:
    """How deep ``data``'s arrays and objects nest (walked without recursion).

    >>> _depth({"a": [1, {"b": []}]}), _depth("x")
    (4, 0)
    """
    deepest = 0
    todo: list[tuple[Any, int]] = [(data, 1)]
    while todo:
        value, depth = todo.pop()
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
            todo.extend((child, depth + 1) for child in children)
    return deepest


def body_digest(body: bytes) -> str:
    """A request body's identity (hex SHA-256, 32 chars): a retried delivery's is the same."""
    return hashlib.sha256(body).hexdigest()[:32]


# ----- Alertmanager and Grafana --------------------------------------------------------


def _alertmanager(data: dict[str, Any], delivery: str) -> list[Alert]:
    if str(data.get("version", "4")) != "4":
        raise BadPayload(f"Alertmanager webhook version {data.get('version')!r}; 4 is supported")
    return [_group("alertmanager", data, delivery, key=_required(data, "groupKey"))]


def _grafana(data: dict[str, Any], delivery: str) -> list[Alert]:
    alerts = _alerts(data)
    key = data.get("groupKey") or (alerts[0].get("fingerprint") if alerts else None)
    if not key:
        raise BadPayload("neither groupKey nor a fingerprint to group repeats by")
    alert = _group("grafana", data, delivery, key=str(key))
    extra = {k: str(data[k]) for k in ("message", "state") if data.get(k)}
    return [_with_fields(alert, extra, title=str(data.get("title") or alert.title))]


def _group(source: str, data: dict[str, Any], delivery: str, *, key: str) -> Alert:
    alerts = _alerts(data)
    status = _status(str(data.get("status") or "firing"))
    common = _strings(data.get("commonLabels") or {})
    notes = _strings(data.get("commonAnnotations") or {})
    first = alerts[0] if alerts else {}
    first_labels = _strings(first.get("labels") or {})
    title = notes.get("summary") or common.get("alertname") or first_labels.get("alertname")
    fields = {f"annotation.{k}": v for k, v in notes.items()}
    links: list[tuple[str, str]] = []
    for n, item in enumerate(alerts[:50], 1):
        labels = _strings(item.get("labels") or {})
        extra = {k: v for k, v in labels.items() if common.get(k) != v}
        line = f"{item.get('status', '?')} since {item.get('startsAt', '?')}"
        if extra:
            line += " " + ", ".join(f"{k}={v}" for k, v in sorted(extra.items()))
        for name in ("valueString", "values"):
            if item.get(name):
                line += f" {name}={json.dumps(item[name], sort_keys=True)}"
        fields[f"alert.{n}"] = line
        for name in ("generatorURL", "dashboardURL", "panelURL", "silenceURL"):
            if item.get(name) and len(links) < 10:
                links.append((f"{name} ({n})", str(item[name])))
    if len(alerts) > 50:
        fields["alerts.more"] = f"{len(alerts) - 50} more alert(s) in this group"
    if data.get("externalURL"):
        links.append(("externalURL", str(data["externalURL"])))
    return Alert(
        source=source,
        dedupe_key=key_of(source, key),
        status=status,
        title=str(title or key),
        severity=common.get("severity", first_labels.get("severity", "")),
        service=common.get("service", common.get("job", "")),
        labels=common or first_labels,
        fields=fields,
        links=tuple(links),
        starts_at=min((t for t in (_when(a.get("startsAt")) for a in alerts) if t), default=None),
        ends_at=_when(first.get("endsAt")) if status is AlertStatus.RESOLVED else None,
        delivery_id=delivery,
    )


def _alerts(data: dict[str, Any]) -> list[dict[str, Any]]:
    alerts = data.get("alerts")
    if not isinstance(alerts, list) or not all(isinstance(a, dict) for a in alerts):
        raise BadPayload("alerts must be a list of objects")
    return alerts


# ----- PagerDuty -----------------------------------------------------------------------

_PD_FIRING = {"incident.triggered", "incident.reopened"}
_PD_RESOLVED = {"incident.resolved"}


def _pagerduty(data: dict[str, Any], delivery: str) -> list[Alert]:
    event = data.get("event")
    if not isinstance(event, dict):
        raise BadPayload('no event object (PagerDuty v3 webhooks send {"event": {…}})')
    kind = str(_required(event, "event_type"))
    incident = event.get("data") or {}
    if kind not in _PD_FIRING | _PD_RESOLVED or incident.get("type") != "incident":
        return []  # pagey.ping, an acknowledgement, a note…: not a firing nor a resolve
    resolved = kind in _PD_RESOLVED
    service = (incident.get("service") or {}).get("summary", "")
    priority = (incident.get("priority") or {}).get("summary", "")
    fields = {"event_type": kind}
    for name in ("number", "status", "urgency", "incident_key", "created_at"):
        if incident.get(name) is not None:
            fields[name] = str(incident[name])
    agent = (event.get("agent") or {}).get("summary")
    if agent:
        fields["agent"] = str(agent)
    links = (("incident", str(incident["html_url"])),) if incident.get("html_url") else ()
    return [
        Alert(
            source="pagerduty",
            dedupe_key=key_of("pagerduty", str(_required(incident, "id"))),
            status=AlertStatus.RESOLVED if resolved else AlertStatus.FIRING,
            title=str(incident.get("title") or incident["id"]),
            severity=str(priority or incident.get("urgency") or ""),
            service=str(service),
            fields=fields,
            links=links,
            starts_at=_when(incident.get("created_at")),
            ends_at=_when(event.get("occurred_at")) if resolved else None,
            delivery_id=str(event.get("id") or delivery)[:200],
        )
    ]


# ----- Datadog ---------------------------------------------------------------------------

_DD_RESOLVED = {"recovered", "resolved", "ok"}


def _datadog(data: dict[str, Any], delivery: str) -> list[Alert]:
    title = str(_required(data, "title"))
    transition = str(data.get("alert_transition") or "").strip()
    key = data.get("aggreg_key") or data.get("alert_cycle_key") or data.get("alert_id") or title
    tags = data.get("tags") or ""
    labels = dict(
        _tag(t) for t in (tags if isinstance(tags, list) else str(tags).split(",")) if t.strip()
    )
    fields = {
        k: str(data[k])
        for k in (
            "body",
            "event_type",
            "alert_transition",
            "alert_id",
            "alert_scope",
            "alert_query",
            "hostname",
            "date",
            "last_updated",
        )
        if data.get(k) not in (None, "")
    }
    link = data.get("link") or data.get("url")
    return [
        Alert(
            source="datadog",
            dedupe_key=key_of("datadog", str(key)),
            status=(
                AlertStatus.RESOLVED if transition.lower() in _DD_RESOLVED else AlertStatus.FIRING
            ),
            title=title,
            severity=str(data.get("alert_priority") or data.get("priority") or ""),
            service=labels.get("service", ""),
            labels=labels,
            fields=fields,
            links=(("datadog", str(link)),) if link else (),
            delivery_id=str(data.get("id") or delivery)[:200]
            + (f":{transition}" if transition else ""),
        )
    ]


def _tag(tag: str) -> tuple[str, str]:
    name, _, value = tag.strip().partition(":")
    return name, value


# ----- generic ---------------------------------------------------------------------------


def _generic(data: dict[str, Any], delivery: str) -> list[Alert]:
    links = data.get("links") or []
    if not isinstance(links, list):
        raise BadPayload("links must be a list of {label, url}")
    return [
        Alert(
            source="generic",
            dedupe_key=key_of("generic", str(_required(data, "key"))),
            status=_status(str(data.get("status") or "firing")),
            title=str(_required(data, "title")),
            severity=str(data.get("severity") or ""),
            service=str(data.get("service") or ""),
            labels=_strings(data.get("labels") or {}),
            fields=_strings(data.get("fields") or {}),
            links=tuple((str(x.get("label") or "link"), str(x["url"])) for x in links),
            starts_at=_when(data.get("starts_at")),
            ends_at=_when(data.get("ends_at")),
            delivery_id=str(data.get("id") or delivery)[:200],
        )
    ]


# ----- helpers ---------------------------------------------------------------------------


def _required(data: Mapping[str, Any], name: str) -> Any:
    value = data.get(name)
    if value in (None, ""):
        raise BadPayload(f"{name} is missing")
    return value


def _status(text: str) -> AlertStatus:
    try:
        return AlertStatus(text.lower())
    except ValueError as exc:
        raise BadPayload(f"status must be firing or resolved, not {text!r}") from exc


def _strings(values: Any) -> dict[str, str]:
    if not isinstance(values, dict):
        raise BadPayload("labels, annotations and fields must be objects")
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


def _when(value: Any) -> datetime | None:
    """An ISO 8601 time (Go's zero time ``0001-01-01T00:00:00Z``, one out of range in UTC
    or not a time at all: None).

    >>> _when("9999-12-31T23:59:59-14:00") is None, _when("2026-12-05T14:02:00Z").hour
    (True, 14)
    """
    if not value or not isinstance(value, str) or value.startswith("0001-01-01"):
        return None
    value = _FRACTION.sub(lambda m: m.group(0)[:7], value.replace("Z", "+00:00"))
    try:
        when = datetime.fromisoformat(value)
        return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    except (ValueError, OverflowError):  # not a time, or past year 9999 in UTC
        return None


def _with_fields(alert: Alert, extra: dict[str, str], *, title: str) -> Alert:
    return Alert(**{**alert.__dict__, "fields": {**alert.fields, **extra}, "title": title})


def _why(exc: Exception) -> str:
    return f"{exc} is missing" if isinstance(exc, KeyError) else str(exc)


_PARSERS: dict[str, Callable[[dict[str, Any], str], list[Alert]]] = {
    "alertmanager": _alertmanager,
    "grafana": _grafana,
    "pagerduty": _pagerduty,
    "datadog": _datadog,
    "generic": _generic,
}
