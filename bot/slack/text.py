"""Slack message text as the agent should read it: the bot's mention removed, markup made plain.

Slack sends message text in its own markup (docs.slack.dev, "Formatting text for app
surfaces"): mentions ``<@U123>`` or ``<@U123|name>``, channels ``<#C123|name>``,
special mentions ``<!here>``, user groups ``<!subteam^S123|@oncall>``, links
``<https://…|label>``, and ``&amp;``, ``&lt;``, ``&gt;`` escaped. Other users' mentions
stay ``<@U…>``: the model understands them and they render as mentions when echoed.
"""

from __future__ import annotations

import re

_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_CHANNEL = re.compile(r"<#[CG][A-Z0-9]+\|([^>]*)>")
_SUBTEAM = re.compile(r"<!subteam\^[A-Z0-9]+(?:\|([^>]*))?>")
_SPECIAL = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")
_STOP = re.compile(r"\s*stop[.!]*\s*", re.IGNORECASE)
_SPACES = re.compile(r"[ \t]{2,}")


def mentions(text: str, user_id: str) -> bool:
    """Whether ``text`` (raw Slack markup) mentions ``user_id``.

    >>> mentions("<@U0BOT> look", "U0BOT"), mentions("<@U0BOT|warroom> hi", "U0BOT")
    (True, True)
    >>> mentions("ping <@U0ALICE>", "U0BOT")
    False
    """
    return any(m.group(1) == user_id for m in _MENTION.finditer(text))


def clean_text(text: str, *, bot_user_id: str) -> str:
    """``text`` without the bot's mentions, with channel, group and link markup made plain.

    >>> clean_text("<@U0BOT> see <#C1|pay> &amp; <https://x.io|graph>", bot_user_id="U0BOT")
    'see #pay & graph (https://x.io)'
    >>> clean_text("<@U0BOT>  ask <@U0ALICE>, <!subteam^S1|@oncall> <!here>", bot_user_id="U0BOT")
    'ask <@U0ALICE>, @oncall @here'
    >>> clean_text("  pods   down\\n  since 14:02 ", bot_user_id="U0BOT")  # no markup at all
    'pods down\\nsince 14:02'
    """
    if not text:
        return ""
    plain = _plain_markup(text, bot_user_id) if "<" in text or "&" in text else text
    lines = [_SPACES.sub(" ", line).strip() for line in plain.strip().splitlines()]
    return "\n".join(lines).strip()


def is_stop(text: str) -> bool:
    """Whether cleaned ``text`` is the word ``stop`` alone (any case, ``.``/``!`` allowed).

    >>> is_stop("stop"), is_stop(" Stop! "), is_stop("stop the deploy")
    (True, True, False)
    """
    return _STOP.fullmatch(text) is not None


def _plain_markup(text: str, bot_user_id: str) -> str:
    """``text`` without the bot's mentions and with Slack's markup made plain (every
    piece of markup holds ``<`` or ``&``: text with neither needs none of this)."""
    without_bot = _MENTION.sub(lambda m: "" if m.group(1) == bot_user_id else m.group(0), text)
    plain = _CHANNEL.sub(lambda m: f"#{m.group(1)}", without_bot)
    plain = _SUBTEAM.sub(lambda m: m.group(1) or "@group", plain)
    plain = _SPECIAL.sub(lambda m: f"@{m.group(1)}", plain)
    plain = _LINK.sub(_plain_link, plain)
    return plain.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _plain_link(match: re.Match[str]) -> str:
    url, label = match.group(1), match.group(2)
    if not label or label == url:
        return url.removeprefix("mailto:")
    return f"{label} ({url})"
