"""``/agent skills …``: list, show, edit, new, delete, history and revert org skills.

Plain async handlers over a ``FileStore`` and an ``AsyncWebClient``; the bolt app wires
them with ack first (Slack: ack within 3 s)::

    @app.command("/agent")
    async def agent(ack, body):
        await ack()
        await skills.handle_command(SkillsCommand.from_body(body))

    @app.view(re.compile("^warroom_skill_"))
    async def submitted(ack, body):
        await ack(**(await skills.handle_submission(Submission.from_body(body)) or {}))

Editing opens a loading modal with the ``trigger_id`` at once (it expires 3 s after the
user acts) and fills it with ``views.update``. Saving writes with ``expected_version`` =
the version the editor opened; a newer version refuses the save with the diff on the
field. Who may change skills is an ``EditPolicy``.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackCallFailed, TriggerExpired, slack_call
from bot.slack.render import (
    Block,
    escape_mrkdwn,
    section,
    sections_from_lines,
    split_markdown,
    truncate,
)
from bot.slack.respond import respond
from bot.slack.skills.edit_policy import EditPolicy
from bot.slack.skills.editor import (
    DELETE_CALLBACK_ID,
    EDIT_CALLBACK_ID,
    NAME_BLOCK_ID,
    NEW_CALLBACK_ID,
    NEW_SKILL_TEMPLATE,
    PART_BLOCK_PREFIX,
    EditorTarget,
    Submission,
    confirm_delete_view,
    editor_view,
    loading_view,
    message_view,
)
from memory_store import (
    CaseConflict,
    DatabaseUnavailable,
    FileNotFound,
    FileStore,
    FileVersion,
    InvalidPath,
    InvalidSkill,
    Namespace,
    Origin,
    Revision,
    Scope,
    StaleVersion,
    StoreError,
    VersionNotFound,
)

logger = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
MAX_ERROR_CHARS = 2_000  # no documented cap for a view error; kept well inside a modal
MAX_SHOW_MESSAGES = 3
MAX_SHOW_MARKDOWN_CHARS = 11_000
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_CONTENT_BLOCK = f"{PART_BLOCK_PREFIX}1"
USAGE = (
    "*Usage:* `/agent skills list` · `show NAME` · `edit NAME` · `new` · `delete NAME` · "
    "`history NAME` · `revert NAME VERSION`"
)


@dataclass(frozen=True)
class SkillsCommand:
    """A ``/agent`` slash command, as far as skills care.

    ``org_id`` is ``enterprise_id or team_id``; ``words`` are the command's text split
    on whitespace, with a leading ``skills`` removed.
    """

    org_id: str
    user_id: str
    channel_id: str
    trigger_id: str
    words: tuple[str, ...]
    response_url: str | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> SkillsCommand:
        """From bolt's ``body`` of a slash command (Slack's form fields)."""
        words = str(body.get("text", "")).split()
        if words and words[0].lower() == "skills":
            words = words[1:]
        return cls(
            org_id=str(body.get("enterprise_id") or body["team_id"]),
            user_id=str(body["user_id"]),
            channel_id=str(body["channel_id"]),
            trigger_id=str(body.get("trigger_id", "")),
            words=tuple(words),
            response_url=str(body["response_url"]) if body.get("response_url") else None,
        )


class SkillsCommands:
    """The handlers, bound to their store, Slack client and edit policy."""

    def __init__(self, store: FileStore, client: AsyncWebClient, policy: EditPolicy) -> None:
        """``policy`` says who may create, edit, delete and revert skills."""
        self._store = store
        self._client = client
        self._policy = policy

    # ----- the slash command -------------------------------------------------------

    async def handle_command(self, command: SkillsCommand) -> None:
        """Run one ``/agent skills …`` command (call it after ``ack()``).

        Replies go to the user only: ephemeral messages, or a modal. Slack and store
        failures are told to the user in plain words, never raised.
        """
        verb, args = (command.words[0].lower(), command.words[1:]) if command.words else ("", ())
        try:
            await self._dispatch(command, verb, args)
        except (StoreError, SlackCallFailed) as exc:
            logger.warning("/agent skills %s failed: %s", verb, exc)
            await self._tell(command, f":warning: That did not work: {_plain_error(exc)}")

    async def _dispatch(self, command: SkillsCommand, verb: str, args: Sequence[str]) -> None:
        one_name = len(args) == 1
        if verb == "list" and not args:
            await self._list(command)
        elif verb == "show" and one_name:
            await self._show(command, args[0])
        elif verb in ("edit", "delete") and one_name:
            await self._open_modal(command, verb, args[0])
        elif verb == "new" and len(args) <= 1:
            await self._open_modal(command, "new", args[0] if args else "")
        elif verb == "history" and one_name:
            await self._history(command, args[0])
        elif verb == "revert" and len(args) == 2 and args[1].isdigit():
            await self._revert(command, args[0], int(args[1]))
        else:
            await self._tell(command, USAGE)

    async def _list(self, command: SkillsCommand) -> None:
        entries = await self._store.index(_skills(command.org_id))
        lines = [
            f"• `{escape_mrkdwn(name)}` — {escape_mrkdwn(truncate(entry.summary, 300))}"
            for entry in entries
            if (name := _skill_name(entry.path)) is not None
        ]
        if not lines:
            await self._tell(command, "No skills yet. Create one with `/agent skills new`.")
            return
        blocks = [section(f"*Skills* ({len(lines)})"), *sections_from_lines(lines, max_blocks=49)]
        await self._tell(command, f"{len(lines)} skills", blocks)

    async def _show(self, command: SkillsCommand, name: str) -> None:
        current = await self._read_skill(command, name)
        if current is None:
            return
        fence = "`" * max(3, _longest_backtick_run(current.content) + 1)
        source = f"{fence}\n{current.content.rstrip(chr(10))}\n{fence}"
        chunks = split_markdown(source, MAX_SHOW_MARKDOWN_CHARS)
        if len(chunks) > MAX_SHOW_MESSAGES:
            await self._tell(
                command,
                f"`{escape_mrkdwn(name)}` is {len(current.content):,} characters, too long to "
                f"show here. Open it with `/agent skills edit {escape_mrkdwn(name)}`.",
            )
            return
        head = f"**{name}** · version {current.version}\n\n"
        for i, chunk in enumerate(chunks):
            markdown = (head if i == 0 else "") + chunk
            await self._tell(command, f"{name} (v{current.version})", [_markdown(markdown)])

    async def _history(self, command: SkillsCommand, name: str) -> None:
        if not _valid_name(name):
            await self._tell(command, _bad_name(name))
            return
        try:
            revisions = await self._store.history(_skills(command.org_id), _skill_path(name))
        except FileNotFound:
            await self._tell(command, _no_such_skill(name))
            return
        lines = [_revision_line(r) for r in reversed(revisions)]
        head = section(f"*History of `{escape_mrkdwn(name)}`* (newest first)")
        await self._tell(
            command, f"History of {name}", [head, *sections_from_lines(lines, max_blocks=49)]
        )

    async def _revert(self, command: SkillsCommand, name: str, version: int) -> None:
        if not await self._may_edit(command):
            return
        if not _valid_name(name):
            await self._tell(command, _bad_name(name))
            return
        ns, path = _skills(command.org_id), _skill_path(name)
        try:
            result = await self._store.restore(ns, path, version, Origin(actor=command.user_id))
        except VersionNotFound:
            text = (
                f"Version {version} of `{name}` has no content: it does not exist or is a deletion."
            )
        except FileNotFound:
            text = _no_such_skill(name)
        except InvalidSkill as exc:
            text = f"Version {version} of `{name}` cannot be restored: " + "; ".join(exc.problems)
        else:
            text = (
                f"`{name}` already has the content of version {version}."
                if result.unchanged
                else f"Restored `{name}` to the content of version {version} "
                f"(now version {result.version})."
            )
        await self._tell(command, text)

    # ----- modals --------------------------------------------------------------------

    async def _open_modal(self, command: SkillsCommand, verb: str, name: str) -> None:
        view_id = await self._open_loading(command)
        if view_id is None:
            return
        if not await self._policy.allows(self._client, command.user_id):
            await self._update(view_id, message_view(_not_allowed()))
            return
        await self._update(view_id, await self._modal_for(command.org_id, verb, name))

    async def _open_loading(self, command: SkillsCommand) -> str | None:
        try:
            response = await slack_call(
                "views.open",
                self._client.views_open(trigger_id=command.trigger_id, view=loading_view()),
            )
        except TriggerExpired:
            await self._tell(
                command,
                "Slack allows 3 seconds to open the editor and that time passed. "
                "Please run the command again.",
            )
            return None
        return str(response["view"]["id"])

    async def _modal_for(self, org_id: str, verb: str, name: str) -> dict[str, Any]:
        if verb == "new":
            return editor_view(
                EditorTarget(org_id, name, 0),
                NEW_SKILL_TEMPLATE,
                about="*New skill.* Fill in the name, then the SKILL.md below: its "
                "frontmatter `name` must equal the name above.",
                callback_id=NEW_CALLBACK_ID,
            )
        if not _valid_name(name):
            return message_view(_bad_name(name))
        try:
            current = await self._store.read(_skills(org_id), _skill_path(name))
        except FileNotFound:
            return message_view(_no_such_skill(name))
        target = EditorTarget(org_id, name, current.version)
        if verb == "delete":
            return confirm_delete_view(target)
        try:
            return editor_view(target, current.content, about=_about(name, current))
        except ValueError:
            return message_view(
                f"`{name}` is {len(current.content):,} characters, more than the editor holds. "
                "Use `warroom skills export` and `import` instead."
            )

    async def _update(self, view_id: str, view: dict[str, Any]) -> None:
        try:
            await slack_call("views.update", self._client.views_update(view_id=view_id, view=view))
        except SlackCallFailed as exc:
            logger.warning("views.update of %s failed: %s", view_id, exc)

    # ----- submissions ---------------------------------------------------------------

    async def handle_submission(self, submission: Submission) -> dict[str, Any] | None:
        """Save (or delete) from a submitted modal; returns what to ``ack`` with.

        None closes the modal; ``{"response_action": "errors", "errors": {block: text}}``
        shows problems on the fields; ``{"response_action": "update", "view": …}``
        replaces the modal with a message. Must finish within Slack's 3 s.
        """
        try:
            target = EditorTarget.from_metadata(submission.metadata)
        except ValueError:
            return _update_with("This form is out of date. Close it and run the command again.")
        if target.org_id != submission.org_id:
            return _update_with("This form belongs to another workspace.")
        if not await self._policy.allows(self._client, submission.user_id):
            return _update_with(_not_allowed())
        if submission.callback_id == DELETE_CALLBACK_ID:
            return await self._delete(target, submission.user_id)
        if submission.callback_id == NEW_CALLBACK_ID:
            name = (submission.values.get(NAME_BLOCK_ID) or "").strip()
            if not _valid_name(name):
                return _errors({NAME_BLOCK_ID: _bad_name(name)})
            target = EditorTarget(target.org_id, name, 0)
        elif submission.callback_id != EDIT_CALLBACK_ID:
            return None
        return await self._save(target, submission)

    async def _save(self, target: EditorTarget, submission: Submission) -> dict[str, Any] | None:
        ns, path = _skills(target.org_id), _skill_path(target.name)
        origin = Origin(actor=submission.user_id)
        try:
            result = await self._store.write(
                ns, path, submission.content(), origin, expected_version=target.base_version
            )
        except StaleVersion as exc:
            return await self._stale(target, exc)
        except (CaseConflict, InvalidPath) as exc:
            block = NAME_BLOCK_ID if target.base_version == 0 else _CONTENT_BLOCK
            return _errors({block: _plain_error(exc)})
        except InvalidSkill as exc:
            return _errors({_CONTENT_BLOCK: "Fix the frontmatter: " + "; ".join(exc.problems)})
        except StoreError as exc:
            return _errors({_CONTENT_BLOCK: _plain_error(exc)})
        if result.unchanged:
            return _update_with(f"No changes: `{target.name}` stays at version {result.version}.")
        return _update_with(f"Saved `{target.name}` as version {result.version}.", title="Saved")

    async def _stale(self, target: EditorTarget, exc: StaleVersion) -> dict[str, Any]:
        if target.base_version == 0:
            return _errors({NAME_BLOCK_ID: _name_taken(target.name)})
        if exc.current_version == 0:
            return _errors({_CONTENT_BLOCK: f"`{target.name}` was deleted after you opened it."})
        diff = await self._diff_since(target)
        who = f" by {exc.changed_by_actor}" if exc.changed_by_actor else ""
        head = (
            f"Not saved: version {exc.current_version} was saved{who} after you opened "
            f"version {target.base_version}. Copy your changes, close, and edit again. "
            "Their changes:\n"
        )
        return _errors({_CONTENT_BLOCK: head + truncate(diff, MAX_ERROR_CHARS - len(head))})

    async def _diff_since(self, target: EditorTarget) -> str:
        ns, path = _skills(target.org_id), _skill_path(target.name)
        revisions = await self._store.history(ns, path)
        base = next((r.content for r in revisions if r.version == target.base_version), None)
        current = revisions[-1].content if revisions else None
        return unified_diff(base or "", current or "", target.base_version, revisions[-1].version)

    async def _delete(self, target: EditorTarget, user_id: str) -> dict[str, Any]:
        ns, path = _skills(target.org_id), _skill_path(target.name)
        try:
            await self._store.delete(
                ns, path, Origin(actor=user_id), expected_version=target.base_version
            )
        except FileNotFound:
            return _update_with(f"`{target.name}` was already deleted.")
        except StaleVersion as exc:
            return _update_with(
                f"Not deleted: `{target.name}` changed (now version {exc.current_version}) after "
                "you asked. Look at it again and retry."
            )
        except DatabaseUnavailable as exc:
            return _update_with(_plain_error(exc))
        return _update_with(
            f"Deleted `{target.name}` (its history is kept: "
            f"`/agent skills revert {target.name} {target.base_version}` brings it back).",
            title="Deleted",
        )

    # ----- helpers -------------------------------------------------------------------

    async def _read_skill(self, command: SkillsCommand, name: str) -> FileVersion | None:
        if not _valid_name(name):
            await self._tell(command, _bad_name(name))
            return None
        try:
            return await self._store.read(_skills(command.org_id), _skill_path(name))
        except FileNotFound:
            await self._tell(command, _no_such_skill(name))
            return None

    async def _may_edit(self, command: SkillsCommand) -> bool:
        if await self._policy.allows(self._client, command.user_id):
            return True
        await self._tell(command, _not_allowed())
        return False

    async def may_edit(self, command: SkillsCommand) -> bool:
        """Whether the user may change shared files (the same allow-list as skills); tells
        them when not."""
        return await self._may_edit(command)

    async def tell(self, command: SkillsCommand, text: str, blocks: Sequence[Block] = ()) -> None:
        """An ephemeral reply to the user: ``blocks`` (default: one section of ``text``),
        with ``text`` as the fallback (see ``_tell``)."""
        await self._tell(command, text, blocks)

    @property
    def store(self) -> FileStore:
        """The org file store the commands work on."""
        return self._store

    async def _tell(self, command: SkillsCommand, text: str, blocks: Sequence[Block] = ()) -> None:
        """An ephemeral message to the user: through the command's ``response_url`` (works
        in DMs and channels without the bot), else ``chat.postEphemeral``."""
        if command.response_url:
            shown = list(blocks) or [section(text)]
            await respond(command.response_url, text=truncate(text, 3_000), blocks=shown)
            return
        await slack_call(
            "chat.postEphemeral",
            self._client.chat_postEphemeral(
                channel=command.channel_id,
                user=command.user_id,
                text=truncate(text, 3_000),
                blocks=list(blocks) or [section(text)],
            ),
        )


def unified_diff(old: str, new: str, old_version: int, new_version: int) -> str:
    """A unified diff of two versions of a file, 2 lines of context.

    >>> print(unified_diff("a\\nb\\n", "a\\nc\\n", 1, 2), end="")
    --- version 1
    +++ version 2
    @@ -1,2 +1,2 @@
     a
    -b
    +c
    """
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"version {old_version}",
        tofile=f"version {new_version}",
        n=2,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _skills(org_id: str) -> Namespace:
    return Namespace(org_id, Scope.SKILLS)


def _skill_path(name: str) -> str:
    return f"/{name}/{SKILL_FILE}"


def _skill_name(path: str) -> str | None:
    parts = path.split("/")
    return parts[1] if len(parts) == 3 and parts[2] == SKILL_FILE else None


def _valid_name(name: str) -> bool:
    """docs/architecture.md §6: lowercase letters, digits and single hyphens, 1–64 chars."""
    return 0 < len(name) <= 64 and _NAME.fullmatch(name) is not None


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _markdown(text: str) -> Block:
    return {"type": "markdown", "text": text}


def _about(name: str, current: FileVersion) -> str:
    return (
        f"*`{escape_mrkdwn(name)}`* · version {current.version} · last changed by "
        f"{_who(current.actor)} {_slack_date(current)}"
    )


def _who(actor: str) -> str:
    """A Slack user id as a mention; ``agent``/``cli`` as words."""
    return f"<@{actor}>" if actor[:1] in ("U", "W") else escape_mrkdwn(actor)


def _slack_date(item: FileVersion | Revision) -> str:
    moment = item.updated_at if isinstance(item, FileVersion) else item.created_at
    fallback = moment.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def _revision_line(revision: Revision) -> str:
    who = _who(revision.actor)
    return f"• *v{revision.version}* {revision.operation} by {who}, {_slack_date(revision)}"


def _errors(errors: dict[str, str]) -> dict[str, Any]:
    return {"response_action": "errors", "errors": errors}


def _update_with(text: str, *, title: str = "Skills") -> dict[str, Any]:
    return {"response_action": "update", "view": message_view(text, title=title)}


def _plain_error(exc: Exception) -> str:
    if isinstance(exc, DatabaseUnavailable):
        return "the database is not reachable right now; please try again in a minute."
    if isinstance(exc, InvalidPath):
        return exc.reason
    if isinstance(exc, SlackCallFailed):
        return f"Slack answered `{exc.error}` to {exc.method}."
    return str(exc)


def _not_allowed() -> str:
    return "You are not on the list of people who may change skills. Ask an admin."


def _no_such_skill(name: str) -> str:
    return f"There is no skill named `{name}`. See `/agent skills list`."


def _bad_name(name: str) -> str:
    return (
        f"`{truncate(name, 80)}` is not a skill name: use 1–64 lowercase letters, digits "
        "and single hyphens, like `restart-pods`."
    )


def _name_taken(name: str) -> str:
    return (
        f"A skill named {name} already exists. Choose another name, "
        f"or change it with /agent skills edit {name}."
    )
