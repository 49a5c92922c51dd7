"""``/agent memory``: list and prune the org's ``/memory`` from Slack.

Memory shares the org's file quota with ``/skills`` (``/incident`` keeps a reserve of its
own), so when it fills up mid-incident people need to see it and prune it where they are.
Listing is for everyone; deleting follows the skills allow-list (``WARROOM_SKILL_EDITORS``).
A deletion is a tombstone revision: the history stays and a file can be restored.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.slack.skills.command import SkillsCommand, SkillsCommands
from memory_store import Namespace, Origin, Scope, StoreError

ROOT = "/memory"
MAX_LISTED = 40
USAGE = (
    "`/agent memory` lists the org's shared memory files; "
    "`/agent memory rm /memory/<path> …` deletes some (their history is kept)."
)


class MemoryCommands:
    """The ``/agent memory`` handlers, over the skills commands' store, client and policy."""

    def __init__(self, skills: SkillsCommands) -> None:
        self._skills = skills

    async def handle(self, command: SkillsCommand) -> None:
        """Answer one ``/agent memory …`` command (``command.words`` start with ``memory``).

        Raises:
            SlackCallFailed, SlackUnreachable: the reply could not be sent.
        """
        words = command.words[1:] if command.words[:1] == ("memory",) else command.words
        verb = words[0].lower() if words else "ls"
        if verb in ("ls", "list"):
            await self._skills.tell(command, await self._listing(command.org_id))
        elif verb in ("rm", "delete") and len(words) > 1:
            if await self._skills.may_edit(command):
                await self._skills.tell(command, await self._remove(command, words[1:]))
        else:
            await self._skills.tell(command, USAGE)

    async def _listing(self, org_id: str) -> str:
        store = self._skills.store
        entries = sorted(
            await store.glob(Namespace(org_id, Scope.MEMORY), "**", "/"), key=lambda e: e.path
        )
        files, size = await store.usage(org_id)
        lines = [
            f"`{ROOT}{e.path}` · {e.size_bytes or 0} bytes · {e.updated_at:%Y-%m-%d %H:%M} UTC"
            for e in entries[:MAX_LISTED]
        ]
        if len(entries) > MAX_LISTED:
            lines.append(f"… and {len(entries) - MAX_LISTED} more")
        total = sum(e.size_bytes or 0 for e in entries)
        head = f"*Org memory*: {len(entries)} file(s), {total} bytes"
        quota = f"The org's quota counts {files} file(s), {size} bytes (skills included)."
        return "\n".join([head, *(lines or ["(empty)"]), quota])

    async def _remove(self, command: SkillsCommand, paths: Sequence[str]) -> str:
        ns = Namespace(command.org_id, Scope.MEMORY)
        said = []
        for path in paths:
            if not path.startswith(ROOT + "/"):
                said.append(f"`{path}`: not under {ROOT}/, left alone")
                continue
            try:
                await self._skills.store.delete(
                    ns, path.removeprefix(ROOT), Origin(command.user_id)
                )
            except StoreError as exc:
                said.append(f"`{path}`: not deleted ({exc})")
            else:
                said.append(f"`{path}`: deleted (its history is kept)")
        return "\n".join(said)
