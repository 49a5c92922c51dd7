"""Errors raised by ``bot``, and the one place Slack SDK errors are translated.

The tree::

    BotError
    └── SlackCallFailed        a Web API call failed (``method``, Slack's ``error`` code)
        ├── ContentTooLong     msg_too_long, msg_blocks_too_long, invalid_blocks:
        │                      the message did not fit Slack's limits
        ├── TriggerExpired     expired_trigger_id / exchanged_trigger_id: the 3 s to
        │                      open a modal passed
        ├── RateLimited        still HTTP 429 after the client's own retries
        ├── SlackRefused       a permanent refusal (is_archived, not_in_channel,
        │                      channel_not_found, token_revoked, account_inactive,
        │                      invalid_auth, …): trying again cannot help
        └── SlackUnreachable   transport failure (connection, timeout), no answer

``slack_call`` awaits one ``AsyncWebClient`` call and raises these ``from`` the
``slack_sdk``/``aiohttp`` exception.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

T = TypeVar("T")

_TOO_LONG = frozenset({"msg_too_long", "msg_blocks_too_long", "invalid_blocks"})
_TRIGGER = frozenset({"expired_trigger_id", "exchanged_trigger_id", "invalid_trigger_id"})
PERMANENT_ERRORS = frozenset(
    {
        # the channel: archived, or the bot is not (or no longer) in it
        "is_archived",
        "not_in_channel",
        "channel_not_found",
        # the installation: token revoked, app uninstalled, workspace or bot deactivated
        "token_revoked",
        "account_inactive",
        "invalid_auth",
        "not_authed",
        "team_access_not_granted",
        "missing_scope",
    }
)
"""Slack ``error`` codes no retry can fix (docs.slack.dev, each method's "Errors")."""


class BotError(Exception):
    """Base class of every error ``bot`` raises on purpose."""


class SlackCallFailed(BotError):
    """A Slack Web API call failed.

    Attributes:
        method: the Web API method, e.g. ``chat.postMessage``.
        error: Slack's ``error`` code (``ratelimited``, ``channel_not_found``, …), or
            ``transport`` when no answer came.
        status: the HTTP status, when there was an answer.
    """

    def __init__(self, method: str, error: str, *, status: int | None = None) -> None:
        super().__init__(f"{method} failed: {error}")
        self.method = method
        self.error = error
        self.status = status


class ContentTooLong(SlackCallFailed):
    """Slack refused the message's size (``msg_too_long``, ``msg_blocks_too_long``,
    ``invalid_blocks``): split it or send it as a file."""


class TriggerExpired(SlackCallFailed):
    """The ``trigger_id`` could not open a view (Slack: it expires 3 s after the user acts)."""


class RateLimited(SlackCallFailed):
    """Slack still answered HTTP 429 after the client's retries."""


class SlackRefused(SlackCallFailed):
    """Slack refused the call for good (``PERMANENT_ERRORS``): the channel is archived
    or not reachable by the bot, or the installation's token no longer works. Never
    retried; the caller gives the attempt up and says why."""


class SlackUnreachable(SlackCallFailed):
    """No answer from Slack: connection refused or reset, or a timeout."""


async def slack_call(method: str, call: Awaitable[T]) -> T:
    """Await one Slack client call, translating its failures to ``SlackCallFailed``.

    Raises:
        ContentTooLong, TriggerExpired, RateLimited, SlackUnreachable, SlackCallFailed.
    """
    try:
        return await call
    except SlackApiError as exc:
        error = api_error(method, exc)
        _count(method, error.error)
        raise error from exc
    except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
        _count(method, "transport")
        raise SlackUnreachable(method, "transport") from exc


def _count(method: str, error: str) -> None:
    """Count a failed Slack call in the process's metrics (imported here, on a failure:
    the metrics module loads the agent, and this module's errors are also the fakes')."""
    from bot.metrics import default_metrics

    default_metrics().count_slack_error(method, error)


def api_error(method: str, exc: SlackApiError) -> SlackCallFailed:
    """The ``SlackCallFailed`` subclass for a ``SlackApiError`` (not raised here)."""
    status = getattr(exc.response, "status_code", None)
    data = getattr(exc.response, "data", None)
    error = str(data.get("error", "unknown")) if isinstance(data, dict) else "unknown"
    if status == 429 or error == "ratelimited":
        return RateLimited(method, error, status=status)
    if error in _TOO_LONG:
        return ContentTooLong(method, error, status=status)
    if error in _TRIGGER:
        return TriggerExpired(method, error, status=status)
    if error in PERMANENT_ERRORS:
        return SlackRefused(method, error, status=status)
    return SlackCallFailed(method, error, status=status)
