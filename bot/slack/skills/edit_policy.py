"""Who may change skills from Slack: everyone, or an allow-list of users and user groups."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackCallFailed, slack_call

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EditPolicy:
    """The skill-editor allow-list; both sets empty means everyone may edit.

    ``user_ids`` are Slack user ids (``U…``/``W…``), ``usergroup_ids`` user-group ids
    (``S…``), whose members are looked up with ``usergroups.users.list`` (bot scope
    ``usergroups:read``) at each check, so membership changes apply at once.
    """

    user_ids: frozenset[str] = frozenset()
    usergroup_ids: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, spec: str) -> EditPolicy:
        """From the ``WARROOM_SKILL_EDITORS`` setting: ids separated by commas or spaces.

        >>> EditPolicy.parse("U01, S02 W03") == EditPolicy(
        ...     frozenset({"U01", "W03"}), frozenset({"S02"}))
        True
        """
        ids = [part for part in re.split(r"[\s,]+", spec.strip()) if part]
        groups = frozenset(i for i in ids if i.startswith("S"))
        return cls(user_ids=frozenset(ids) - groups, usergroup_ids=groups)

    @property
    def allows_everyone(self) -> bool:
        """True when no allow-list is set."""
        return not self.user_ids and not self.usergroup_ids

    async def allows(self, client: AsyncWebClient, user_id: str) -> bool:
        """Whether ``user_id`` may create, edit, delete or revert skills.

        A user group that cannot be read (unknown id, missing scope) counts as not
        containing the user; the failure is logged.
        """
        if self.allows_everyone or user_id in self.user_ids:
            return True
        for group in sorted(self.usergroup_ids):
            if user_id in await _members(client, group):
                return True
        return False


async def _members(client: AsyncWebClient, usergroup_id: str) -> frozenset[str]:
    try:
        response = await slack_call(
            "usergroups.users.list", client.usergroups_users_list(usergroup=usergroup_id)
        )
    except SlackCallFailed as exc:
        logger.warning("cannot read user group %s: %s", usergroup_id, exc)
        return frozenset()
    return frozenset(str(user) for user in response.get("users") or [])
