"""The alert intake's Slack messages: thread root, "on it", repeats, resolve, storm summary.

Pure functions from alerts to ``SlackMessage``. The alert's own text is escaped
(``escape_mrkdwn``): a label cannot mention ``@channel`` or fake a link.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.alerts.model import Alert
from bot.slack.render import (
    MAX_FALLBACK_CHARS,
    SlackMessage,
    escape_mrkdwn,
    notice,
    section,
    stop_button,
    truncate,
)

MAX_ROOT_FIELDS = 12
MAX_SUMMARY_LINES = 40
ICONS = {"firing": ":rotating_light:", "resolved": ":white_check_mark:"}


def root_message(alert: Alert) -> SlackMessage:
    """The alert as its thread's first message (webhook alerts): title, severity,
    service, labels, the first fields and links.

    >>> from bot.alerts.model import AlertStatus
    >>> root_message(Alert("generic", "k", AlertStatus.FIRING, "Disk full")).text
    ':rotating_light: [firing] Disk full'
    """
    head = f"{ICONS[alert.status.value]} [{alert.status.value}] {alert.title}"
    lines = [f"*{escape_mrkdwn(truncate(head, 300))}*"]
    facts = [
        f"{name}: {escape_mrkdwn(value)}"
        for name, value in (
            ("source", alert.source),
            ("severity", alert.severity),
            ("service", alert.service),
        )
        if value
    ]
    lines.append(" · ".join(facts))
    pairs = [*alert.labels.items(), *alert.fields.items()][:MAX_ROOT_FIELDS]
    lines += [f"`{escape_mrkdwn(k)}` {escape_mrkdwn(truncate(v, 300))}" for k, v in pairs]
    lines += [f"<{url}|{escape_mrkdwn(label)}>" for label, url in alert.links[:5] if _safe(url)]
    text = truncate(escape_mrkdwn(head), MAX_FALLBACK_CHARS)  # notifications show it: no mentions
    return SlackMessage(text=text, blocks=(section(truncate("\n".join(lines), 2900)),))


def on_it_message(session_id: str) -> SlackMessage:
    """The first reply: the agent is on it, with the Stop button."""
    text = (
        ":mag: I'm on it: investigating this alert now. Reply here to steer me; "
        "`stop` or the button ends it."
    )
    return SlackMessage(
        text=truncate(text, MAX_FALLBACK_CHARS), blocks=(section(text), stop_button(session_id))
    )


def repeat_note(*, count: int, first_at: datetime) -> str:
    """``still firing, 3rd time since 14:02 UTC``.

    >>> from datetime import UTC, datetime
    >>> repeat_note(count=3, first_at=datetime(2026, 12, 5, 14, 2, tzinfo=UTC))
    'Still firing, 3rd time since 14:02 UTC.'
    """
    return f"Still firing, {_ordinal(count)} time since {first_at:%H:%M} UTC."


def resolved_note(alert: Alert, *, now: datetime, first_at: datetime) -> str:
    """``Resolved at 14:31 UTC (firing since 14:02 UTC).``; the source's end time if given."""
    at = alert.ends_at or now
    return f"Resolved at {at:%H:%M} UTC (firing since {first_at:%H:%M} UTC)."


def summary_root(max_open: int) -> SlackMessage:
    """The storm summary thread's first message, before its tally."""
    return summary_tally(max_open, [])


def summary_tally(max_open: int, folded: Sequence[tuple[str, str, int, bool]]) -> SlackMessage:
    """The storm summary: every folded problem with its count (``AlertStore.folded``).

    ``folded``: ``(dedupe_key, title, count, last firing)``, most alerts first.
    """
    total = sum(n for _, _, n, _ in folded)
    head = (
        f":ocean: *Alert storm*: {max_open} alert investigations are running, the most at "
        f"once; {total} more alert(s) of {len(folded)} problem(s) are listed here, not "
        "investigated. Mention me in this thread to look at one."
    )
    lines = [
        f"{ICONS['firing' if firing else 'resolved']} {escape_mrkdwn(truncate(title, 120))} "
        f"×{count} · `{escape_mrkdwn(truncate(key, 80))}`"
        for key, title, count, firing in folded[:MAX_SUMMARY_LINES]
    ]
    if len(folded) > MAX_SUMMARY_LINES:
        rest = folded[MAX_SUMMARY_LINES:]
        lines.append(f"…and {len(rest)} more problem(s), {sum(n for _, _, n, _ in rest)} alert(s)")
    blocks = [section(head)]
    if lines:
        blocks.append(section(truncate("\n".join(lines), 2900)))
    return SlackMessage(text=f"Alert storm: {total} alert(s) folded", blocks=tuple(blocks))


def note_message(text: str) -> SlackMessage:
    """A repeat's or resolve's reply in the thread."""
    return notice(text)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _safe(url: str) -> bool:
    return url.startswith(("https://", "http://")) and not any(c in url for c in "<>| ")
