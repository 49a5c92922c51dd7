"""Alerting apps' posts as they reach a Slack channel, for ``warroom fake-slack`` and the drill.

Shapes (docs.slack.dev "bot_message" and message payloads; each integration's own
posts): an incoming webhook's post has the ``bot_message`` subtype, a ``username`` and
a ``bot_id`` (Alertmanager's Slack receiver, Datadog); an app's post through its bot
token has its bot user in ``user``, a ``bot_id``, ``app_id`` and ``bot_profile``
(Grafana, PagerDuty, Sentry, Opsgenie). Content is in legacy ``attachments`` (title,
title link, text, fields, color, footer) or Block Kit inside them. Hosts are
``.invalid``; the problem is the drill's: ``checkout-api`` answering 500s since 14:02.
"""

from __future__ import annotations

from typing import Any

JsonDict = dict[str, Any]

SOURCES = ("alertmanager", "grafana", "pagerduty", "datadog", "sentry", "opsgenie")
AM_URL = "http://alertmanager.example.invalid:9093/#/alerts?receiver=slack-alerts"


def alert_post(source: str, *, resolved: bool = False) -> JsonDict:
    """The post ``source``'s Slack integration makes for the checkout-api 500s (firing,
    or ``resolved``), without ``ts`` (Slack gives it).

    >>> alert_post("alertmanager")["attachments"][0]["title"]
    '[FIRING:1] HighErrorRate (checkout-api payments critical)'

    Raises:
        ValueError: ``source`` is not one of ``SOURCES``.
    """
    makers = {
        "alertmanager": _alertmanager,
        "grafana": _grafana,
        "pagerduty": _pagerduty,
        "datadog": _datadog,
        "sentry": _sentry,
        "opsgenie": _opsgenie,
    }
    if source not in makers:
        raise ValueError(f"no such alert source {source!r}; one of {', '.join(SOURCES)}")
    return makers[source](resolved)


def _app(name: str, resolved: bool, attachment: JsonDict) -> JsonDict:
    bot_id, app_id = f"B0{name.upper()}", f"A0{name.upper()}"
    return {
        "user": f"U0{name.upper()}",
        "text": "",
        "bot_id": bot_id,
        "app_id": app_id,
        "bot_profile": {"id": bot_id, "app_id": app_id, "name": name, "deleted": False},
        "attachments": [{"id": 1, "color": "#2EB67D" if resolved else "#E01E5A", **attachment}],
    }


def _alertmanager(resolved: bool) -> JsonDict:
    title = (
        f"[{'RESOLVED' if resolved else 'FIRING:1'}] HighErrorRate (checkout-api payments critical)"
    )
    text = (
        f"*Alert:* checkout-api 5xx ratio above 5% - `critical`\n"
        f"*Description:* {'2' if resolved else '64'}% of POST /api/checkout answered 500 "
        "over the last 5 minutes.\n*Details:*\n  • alertname: `HighErrorRate`\n"
        "  • job: `checkout-api`\n  • severity: `critical`"
    )
    return {
        "subtype": "bot_message",
        "username": "Alertmanager",
        "bot_id": "B0ALERTMANAGER",
        "text": "",
        "attachments": [
            {
                "id": 1,
                "color": "good" if resolved else "danger",
                "title": title,
                "title_link": AM_URL,
                "text": text,
                "fallback": f"{title} | {AM_URL}",
                "mrkdwn_in": ["fallback", "pretext", "text"],
            }
        ],
    }


def _grafana(resolved: bool) -> JsonDict:
    state = "RESOLVED" if resolved else "FIRING:1"
    return _app("Grafana", resolved, {
        "title": f"[{state}] CheckoutErrors Payments (checkout-api)",
        "title_link": "https://grafana.example.invalid/alerting/list",
        "text": (
            f"**{'Resolved' if resolved else 'Firing'}**\n\nValue: B=0.64\nLabels:\n"
            " - alertname = CheckoutErrors\n - grafana_folder = Payments\n"
            " - service = checkout-api\nAnnotations:\n - summary = checkout-api 5xx ratio high\n"
            "Source: https://grafana.example.invalid/alerting/grafana/chk1/view?orgId=1\n"
        ),
        "footer": "Grafana v11.3.1",
    })  # fmt: skip


def _pagerduty(resolved: bool) -> JsonDict:
    url = "https://acme.pagerduty.example.invalid/incidents/Q1CHECKOUT500"
    status = "Resolved" if resolved else "Triggered"
    return _app("PagerDuty", resolved, {
        "fallback": f"{status}: #5012 checkout-api returns 500s",
        "blocks": [
            {"type": "section",
             "text": {"type": "mrkdwn", "text": f"*<{url}|[#5012] checkout-api returns 500s>*"}},
            {"type": "section", "fields": [
                {"type": "mrkdwn", "text": f"*Status:*\n{status}"},
                {"type": "mrkdwn", "text": "*Urgency:*\nHigh"},
                {"type": "mrkdwn", "text": "*Service:*\ncheckout-api"},
            ]},
        ],
    })  # fmt: skip


def _datadog(resolved: bool) -> JsonDict:
    word = "Recovered" if resolved else "Triggered"
    url = "https://app.datadoghq.example.invalid/monitors/5120?group=env%3Aprod"
    return {
        "subtype": "bot_message",
        "username": "Datadog",
        "bot_id": "B0DATADOG",
        "text": "",
        "attachments": [{
            "id": 1, "color": "#2dbe54" if resolved else "#d7292a",
            "title": f"[{word} on {{env:prod}}] checkout-api 5xx ratio > 5%",
            "title_link": url,
            "text": "5xx ratio of service:checkout-api is *64%* (threshold 5%).",
            "fallback": f"{word}: checkout-api 5xx ratio > 5%",
        }],
    }  # fmt: skip


def _sentry(resolved: bool) -> JsonDict:
    return _app("Sentry", resolved, {
        "title": "TimeoutError: timeout acquiring connection from pool",
        "title_link": "https://acme.sentry.example.invalid/issues/5120001/?referrer=slack",
        "pretext": "Resolved" if resolved else "",
        "text": "checkout/db.py in acquire",
        "fields": [{"title": "environment", "value": "production", "short": True}],
        "footer": "CHECKOUT-API-7Q via New checkout errors",
    })  # fmt: skip


def _opsgenie(resolved: bool) -> JsonDict:
    return _app("Opsgenie", resolved, {
        "pretext": "Alert closed by Opsgenie" if resolved else "New alert created via API",
        "title": "#3120: checkout-api returns 500s",
        "title_link": "https://acme.app.opsgenie.example.invalid/alert/detail/c0ffee00-1/details",
        "text": "64% of checkout requests fail with HTTP 500.",
        "fields": [{"title": "Priority", "value": "P1", "short": True}],
    })  # fmt: skip
