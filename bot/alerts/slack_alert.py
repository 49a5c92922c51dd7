"""An alerting app's message in a watched channel, as an ``Alert`` (issue #27).

``alert_from_message`` reads the message (``slack_view``), finds which integration
wrote it and what it says (``slack_sources``), and builds the ``Alert``: its title and
status, a ``dedupe_key`` naming the problem so a repeat joins the first thread
(``slack:<channel>:<sender>:<source>:<identity>``), and all the message's content —
every field, label and link, and the whole text as ``fields["message"]`` — for the
model to read as data (``model.for_model`` fences it). The delivery is the message itself
(``slack:<channel>:<ts>``): a redelivered event is taken once.

The key holds the channel and the sender (its ``bot_id``, which Slack sets and no post
can choose; else its app id, else its name) because what a post says is the poster's to
choose: a bot in another channel, or another app (an incoming webhook anyone may create,
named "Alertmanager"), posting the same title must not join the problem's thread, reach
its session, nor carry one channel's alert into another channel's session.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from bot.alerts.model import Alert, key_of
from bot.alerts.slack_sources import recognise
from bot.alerts.slack_view import Sender, view_of

MAX_TITLE_CHARS = 300


def alert_from_message(
    message: Mapping[str, Any], sender: Sender, *, channel_id: str, bot_user_id: str
) -> Alert:
    """The ``Alert`` an alerting app's ``message`` (a ``message`` event) carries.

    Every message gives one: one no integration is recognised in is ``generic``.

    >>> from bot.alerts.slack_view import Sender
    >>> a = alert_from_message({"ts": "1767225600.000100", "attachments": [{
    ...     "title": "[FIRING:1] HighErrorRate (checkout-api critical)",
    ...     "title_link": "http://am.example:9093/#/alerts?receiver=slack"}]},
    ...     Sender("B1", "A1", "Alertmanager"), channel_id="C1", bot_user_id="U0BOT")
    >>> a.source, a.status.value, a.dedupe_key, a.severity
    ('slack:alertmanager', 'firing', 'slack:C1:B1:alertmanager:HighErrorRate', 'critical')
    """
    view = view_of(message, sender, bot_user_id=bot_user_id)
    found = recognise(view)
    ts = str(message.get("ts") or "")
    fields = {**view.fields, "message": view.content}
    fields["posted_by"] = _who(sender)
    return Alert(
        source=f"slack:{found.source}",
        dedupe_key=key_of("slack", channel_id, _poster(sender), found.source, found.identity),
        status=found.status,
        title=(found.title or view.title)[:MAX_TITLE_CHARS],
        severity=found.severity,
        service=found.service,
        labels=dict(found.labels),
        fields=fields,
        links=view.links,
        starts_at=_time_of(ts),
        delivery_id=f"slack:{channel_id}:{ts}",
    )


def _poster(sender: Sender) -> str:
    """Who posted, as the key names it: the bot id first (an incoming webhook's app id is
    shared by every webhook of a workspace's legacy integration)."""
    return sender.bot_id or sender.app_id or sender.name


def _who(sender: Sender) -> str:
    ids = ", ".join(i for i in (sender.bot_id, sender.app_id) if i)
    return f"{sender.name or 'an app'} ({ids})" if ids else sender.name or "an app"


def _time_of(ts: str) -> datetime | None:
    try:
        return datetime.fromtimestamp(float(ts), UTC)
    except ValueError:
        return None
