"""Where the app is installed: its workspace and, in an Enterprise Grid org, the org.

Read once at start from ``auth.test`` (docs.slack.dev: ``team_id``; ``enterprise_id``
when the workspace belongs to an Enterprise Grid org; ``is_enterprise_install``).
Payloads from Slack Connect users name *their* team, not ours; ``view.app_installed_team_id``
of a modal names ours, and this maps it to the org Warroom keys its data by.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackCallFailed, slack_call

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Installation:
    """The installing workspace ``team_id`` and its Grid org (None outside Grid)."""

    team_id: str
    enterprise_id: str | None = None

    @property
    def org_id(self) -> str:
        """``enterprise_id or team_id``: the org Warroom keys sessions and files by."""
        return self.enterprise_id or self.team_id

    @classmethod
    def from_auth_test(cls, answer: Mapping[str, Any]) -> Installation:
        """From an ``auth.test`` answer.

        >>> Installation.from_auth_test({"team_id": "T1", "enterprise_id": "E1"}).org_id
        'E1'
        >>> Installation.from_auth_test({"team_id": "T1"}).org_id
        'T1'
        """
        return cls(str(answer["team_id"]), answer.get("enterprise_id") or None)


async def slack_workspace_url(client: AsyncWebClient) -> str | None:
    """The workspace's URL (``auth.test``'s ``url``, e.g. ``https://acme.slack.com/``), which
    permalinks start with; None when Slack cannot be asked now (logged: the timeline then
    shows entries without links)."""
    try:
        answer = await slack_call("auth.test", client.auth_test())
    except SlackCallFailed as exc:
        logger.warning("auth.test failed (%s): timeline entries will have no permalinks", exc)
        return None
    url = answer.get("url")
    return str(url) if url else None
