"""The skill editor modal: pure builders of Slack views and the parser of their submissions.

Slack limits honoured (Block Kit reference): a ``plain_text_input`` holds ≤ 3,000
chars, so a longer ``SKILL.md`` is spread over several inputs, joined in order on
save; a modal has ≤ 100 blocks and a title of ≤ 24 chars; ``private_metadata`` is
≤ 3,000 chars and carries only the org, the skill name and the version the editor
started from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.slack.installation import Installation
from bot.slack.render import Block, escape_mrkdwn, section, truncate

EDIT_CALLBACK_ID = "warroom_skill_edit"
NEW_CALLBACK_ID = "warroom_skill_new"
DELETE_CALLBACK_ID = "warroom_skill_delete"
CALLBACK_IDS = (EDIT_CALLBACK_ID, NEW_CALLBACK_ID, DELETE_CALLBACK_ID)

MAX_INPUT_CHARS = 3_000
MAX_VIEW_BLOCKS = 100
PART_BLOCK_PREFIX = "skill_part_"
NAME_BLOCK_ID = "skill_name"
ACTION_ID = "value"
_HEADER_BLOCKS = 2
_PART_BLOCK = re.compile(rf"{PART_BLOCK_PREFIX}(\d+)")
NEW_SKILL_TEMPLATE = (
    "---\nname: \ndescription: What this skill does and when to use it.\n---\n\n"
    "# Title\n\n1. First step\n"
)


@dataclass(frozen=True)
class EditorTarget:
    """What a modal is about; serialised into ``private_metadata``.

    ``base_version`` is the version the editor opened (0: a new skill).
    """

    org_id: str
    name: str
    base_version: int

    def to_metadata(self) -> str:
        """The ``private_metadata`` string (JSON, far below Slack's 3,000 chars)."""
        return json.dumps({"org": self.org_id, "name": self.name, "base": self.base_version})

    @classmethod
    def from_metadata(cls, metadata: str) -> EditorTarget:
        """Parse ``private_metadata``. Raises ValueError when it is not ours."""
        try:
            data = json.loads(metadata)
            return cls(str(data["org"]), str(data["name"]), int(data["base"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a skill editor's metadata: {metadata[:100]!r}") from exc


@dataclass(frozen=True)
class Submission:
    """A ``view_submission`` of one of our modals, flattened.

    ``values`` maps block id → the input's value (None when left empty).
    """

    org_id: str
    user_id: str
    callback_id: str
    view_id: str
    metadata: str
    values: Mapping[str, str | None]

    @classmethod
    def from_body(
        cls, body: Mapping[str, Any], *, installation: Installation | None = None
    ) -> Submission:
        """From bolt's ``body`` of a ``view_submission`` (Slack's interaction payload).

        The org is the installation's: ``view.app_installed_team_id`` names the workspace
        the app is installed in (a Slack Connect user's ``team`` is their own), mapped
        to its Grid org by ``installation`` (from ``auth.test``).
        """
        view = body["view"]
        org = _installed_org(body, installation)
        values: dict[str, str | None] = {}
        for block_id, actions in (view.get("state") or {}).get("values", {}).items():
            for action in actions.values():
                values[block_id] = action.get("value")
        return cls(
            org_id=str(org),
            user_id=str(body["user"]["id"]),
            callback_id=str(view.get("callback_id", "")),
            view_id=str(view.get("id", "")),
            metadata=str(view.get("private_metadata", "")),
            values=values,
        )

    def content(self) -> str:
        """The inputs ``skill_part_1 … n`` joined in order (see ``split_for_inputs``)."""
        numbered = sorted(
            (int(m.group(1)), value or "")
            for block_id, value in self.values.items()
            if (m := _PART_BLOCK.fullmatch(block_id))
        )
        parts = [value.replace("\r\n", "\n") for _, value in numbered if value]
        joined = "\n".join(parts)
        return joined if joined.endswith("\n") or not joined else joined + "\n"


def _installed_org(body: Mapping[str, Any], installation: Installation | None) -> str:
    installed = (body.get("view") or {}).get("app_installed_team_id")
    if installation is not None and installed in (None, installation.team_id):
        return installation.org_id
    team = body.get("team") or {}
    if installed and installed != team.get("id"):  # a submitter from another org
        return str(installed)
    enterprise = body.get("enterprise") or {}
    return str(enterprise.get("id") or team.get("enterprise_id") or team.get("id") or "")


def split_for_inputs(content: str, max_chars: int = MAX_INPUT_CHARS) -> list[str]:
    """Spread ``content`` over inputs of ≤ ``max_chars`` chars, cutting between lines.

    Joining the parts with ``"\\n"`` gives ``content`` back, except that a single line
    longer than ``max_chars`` is cut and so gains a line break.

    >>> split_for_inputs("a\\nb\\nc\\n", 3)
    ['a\\nb', 'c\\n']
    """
    parts: list[str] = []
    current: list[str] = []
    size = -1
    for line in _cut_long_lines(content.split("\n"), max_chars):
        if current and size + 1 + len(line) > max_chars:
            parts.append("\n".join(current))
            current, size = [], -1
        current.append(line)
        size += 1 + len(line)
    parts.append("\n".join(current))
    return parts


def _cut_long_lines(lines: Sequence[str], max_chars: int) -> list[str]:
    return [line[i : i + max_chars] for line in lines for i in range(0, len(line) or 1, max_chars)]


# ----- views -----------------------------------------------------------------------


def loading_view(title: str = "Skills") -> dict[str, Any]:
    """The modal opened at once with the ``trigger_id`` (it expires 3 s after the user acts)."""
    return _modal(title, [section(":hourglass_flowing_sand: Loading…")])


def message_view(text: str, *, title: str = "Skills") -> dict[str, Any]:
    """A modal that only says something (errors, confirmations), with a Close button."""
    return _modal(title, [section(text)], close="Close")


def editor_view(
    target: EditorTarget, content: str, *, about: str, callback_id: str = EDIT_CALLBACK_ID
) -> dict[str, Any]:
    """The editor: ``about`` (mrkdwn), then ``content`` over as many inputs as it needs
    plus one empty input to grow into; ``callback_id`` says edit or new.

    Raises:
        ValueError: ``content`` needs more inputs than a modal can hold.
    """
    parts = split_for_inputs(content)
    header = [section(about), _context(_editor_hint(len(parts)))]
    if callback_id == NEW_CALLBACK_ID:
        header.append(_name_input(target.name))
    room = MAX_VIEW_BLOCKS - len(header)
    if len(parts) > room:
        raise ValueError(f"{len(content)} chars need {len(parts)} inputs; a modal holds {room}")
    total = min(len(parts) + 1, room)
    inputs = [_part_input(i + 1, total, parts[i] if i < len(parts) else "") for i in range(total)]
    title = "New skill" if callback_id == NEW_CALLBACK_ID else "Edit skill"
    return _modal(title, header + inputs, submit="Save", callback_id=callback_id, target=target)


def confirm_delete_view(target: EditorTarget) -> dict[str, Any]:
    """Asks to confirm deleting ``target`` at the version shown (the history is kept)."""
    name = escape_mrkdwn(target.name)
    text = (
        f"Delete the skill `{name}` (version {target.base_version})?\n"
        f"Its history is kept: `/agent skills revert {name} {target.base_version}` brings it back."
    )
    return _modal(
        "Delete skill",
        [section(text)],
        submit="Delete",
        callback_id=DELETE_CALLBACK_ID,
        target=target,
    )


def _modal(
    title: str,
    blocks: list[Block],
    *,
    submit: str | None = None,
    close: str = "Cancel",
    callback_id: str | None = None,
    target: EditorTarget | None = None,
) -> dict[str, Any]:
    view: dict[str, Any] = {
        "type": "modal",
        "title": _plain(truncate(title, 24)),
        "close": _plain(close),
        "blocks": blocks,
    }
    if submit is not None:
        view["submit"] = _plain(submit)
    if callback_id is not None:
        view["callback_id"] = callback_id
    if target is not None:
        view["private_metadata"] = target.to_metadata()
    return view


def _part_input(number: int, total: int, value: str) -> Block:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": ACTION_ID,
        "multiline": True,
        "max_length": MAX_INPUT_CHARS,
    }
    if value:
        element["initial_value"] = value
    label = "SKILL.md" if total == 1 else f"SKILL.md (part {number} of {total})"
    return {
        "type": "input",
        "block_id": f"{PART_BLOCK_PREFIX}{number}",
        "optional": number > 1,
        "label": _plain(label),
        "element": element,
    }


def _name_input(name: str) -> Block:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": ACTION_ID,
        "max_length": 64,
        "placeholder": _plain("restart-pods"),
    }
    if name:
        element["initial_value"] = name
    return {
        "type": "input",
        "block_id": NAME_BLOCK_ID,
        "label": _plain("Name (lowercase letters, digits and hyphens)"),
        "element": element,
    }


def _editor_hint(parts: int) -> str:
    if parts == 1:
        return "Write the whole SKILL.md here; the last box is for more text if you need it."
    return (
        f"This SKILL.md is longer than one box holds (3,000 characters), so it is spread "
        f"over {parts} boxes. They are joined in order, one line break between boxes, "
        "when you save; the last box is for more text."
    )


def _context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": truncate(text, 3_000)}]}


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}
