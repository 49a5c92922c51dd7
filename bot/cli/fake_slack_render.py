"""A Slack message as a person reads it in the channel, for ``warroom fake-slack``'s terminal.

Slack shows a message's Block Kit blocks, not its ``text`` (that is the fallback that
notifications show), so the fake prints the blocks the way Slack lays them out
(docs.slack.dev, "Block Kit" reference), as plain lines:

- ``section``: its text, then its ``fields`` two to a line, then its accessory;
- ``header`` in upper case; ``divider`` as a rule; ``image`` as ``[image: alt text]``;
- ``context``: its elements' texts on one line;
- ``actions``: each button as ``[ label ]`` (a select as ``[ placeholder ▾ ]``);
- ``rich_text``: sections, bullet and numbered lists (indented by level), code blocks
  (each line indented four spaces) and quotes (``> ``), with links, mentions and emoji;
- ``markdown``: its text; ``input``: its label and value.

Slack's markup in mrkdwn text is made readable: ``<url|label>`` is ``label (url)``, a
user or channel mention ``@U…``/``#C…``, ``<!here>`` ``@here``, and ``&amp;`` ``&lt;``
``&gt;`` the characters. A message without blocks is its ``text``.

>>> render_message({"text": "fallback", "blocks": [
...     {"type": "section", "text": {"type": "mrkdwn", "text": "Run `kubectl` <@U1>?"}},
...     {"type": "actions", "elements": [
...         {"type": "button", "text": {"type": "plain_text", "text": "Approve"}},
...         {"type": "button", "text": {"type": "plain_text", "text": "Deny"}}]}]})
'Run `kubectl` @U1?\\n[ Approve ]  [ Deny ]'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["readable_mrkdwn", "render_blocks", "render_message"]

RULE = "─" * 40
_MARKUP = re.compile(r"<([^<>|]*)(?:\|([^<>]*))?>")


def render_message(message: Mapping[str, Any]) -> str:
    """``message`` (a ``chat.postMessage`` body, a stored message, an ephemeral) as the
    lines a person sees: its blocks when it has any, else its ``text``."""
    blocks = message.get("blocks")
    if isinstance(blocks, list) and blocks:
        shown = render_blocks(blocks)
        if shown:
            return shown
    return readable_mrkdwn(str(message.get("text", "")))


def render_blocks(blocks: Iterable[Any]) -> str:
    """Each block's lines (see the module docstring), blocks separated by a line break;
    a block of an unknown type shows its ``text``, if any."""
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Mapping):
            lines.extend(_block(block))
    return "\n".join(lines).strip("\n")


def readable_mrkdwn(text: str) -> str:
    """Slack's mrkdwn markup made readable (links, mentions, escapes).

    >>> readable_mrkdwn("see <https://x.io/a|the runbook> &amp; ask <!here> in <#C1|ops>")
    'see the runbook (https://x.io/a) & ask @here in #ops'
    """

    def replace(match: re.Match[str]) -> str:
        target, label = match.group(1), match.group(2)
        if target.startswith("@"):
            return f"@{label or target[1:]}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):
            special = target[1:].split("^", 1)[0]
            return label or (f"@{special}" if special in ("here", "channel", "everyone") else "")
        return f"{label} ({target})" if label and label != target else target

    shown = _MARKUP.sub(replace, text)
    return shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _text(obj: Any) -> str:
    """A text object's text (mrkdwn made readable; plain_text as is)."""
    if not isinstance(obj, Mapping):
        return ""
    text = str(obj.get("text", ""))
    return readable_mrkdwn(text) if obj.get("type") == "mrkdwn" else text


def _block(block: Mapping[str, Any]) -> list[str]:
    kind = block.get("type")
    if kind == "section":
        return _section(block)
    if kind == "header":
        return [_text(block.get("text")).upper()]
    if kind == "divider":
        return [RULE]
    if kind == "image":
        return [f"[image: {block.get('alt_text', '')}]"]
    if kind == "context":
        shown = [_element(e) for e in block.get("elements") or ()]
        return ["  ".join(s for s in shown if s)]
    if kind == "actions":
        shown = [_element(e) for e in block.get("elements") or ()]
        return ["  ".join(s for s in shown if s)]
    if kind == "rich_text":
        return _rich_text(block.get("elements") or ())
    if kind == "markdown":
        return str(block.get("text", "")).splitlines()
    if kind == "input":
        label = _text(block.get("label"))
        value = (block.get("element") or {}).get("initial_value") or ""
        return [f"{label}: {value}"]
    return _text(block.get("text")).splitlines()


def _section(block: Mapping[str, Any]) -> list[str]:
    lines = _text(block.get("text")).splitlines()
    fields = [_text(f) for f in block.get("fields") or ()]
    for left, right in zip(fields[::2], [*fields[1::2], ""], strict=False):
        lines.append(f"{left}    {right}".rstrip() if right else left)
    accessory = block.get("accessory")
    if isinstance(accessory, Mapping) and (shown := _element(accessory)):
        lines.append(shown)
    return lines


def _element(element: Any) -> str:
    """An element of a context or actions block, or an accessory."""
    if not isinstance(element, Mapping):
        return ""
    kind = element.get("type")
    if kind in ("mrkdwn", "plain_text"):
        return _text(element)
    if kind == "image":
        return f"[image: {element.get('alt_text', '')}]"
    if kind == "button":
        return f"[ {_text(element.get('text'))} ]"
    if kind == "overflow":
        return "[ ⋯ ]"
    placeholder = _text(element.get("placeholder")) or _text(element.get("text"))
    return f"[ {placeholder or kind} ▾ ]" if kind else ""


def _rich_text(elements: Iterable[Any]) -> list[str]:
    lines: list[str] = []
    for element in elements:
        if not isinstance(element, Mapping):
            continue
        kind = element.get("type")
        inner = element.get("elements") or ()
        if kind == "rich_text_section":
            lines.extend(_inline(inner).split("\n"))
        elif kind == "rich_text_list":
            indent = "  " * int(element.get("indent") or 0)
            ordered = element.get("style") == "ordered"
            start = int(element.get("offset") or 0)
            for n, item in enumerate(inner, start=start + 1):
                mark = f"{n}." if ordered else "•"
                text = _inline(item.get("elements") or ()) if isinstance(item, Mapping) else ""
                lines.append(f"{indent}{mark} {text}")
        elif kind == "rich_text_preformatted":
            lines.extend(f"    {line}" for line in _inline(inner).split("\n"))
        elif kind == "rich_text_quote":
            lines.extend(f"> {line}" for line in _inline(inner).split("\n"))
    return lines


def _inline(elements: Iterable[Any]) -> str:
    """The text of a rich text section's elements, run together."""
    parts: list[str] = []
    for element in elements:
        if not isinstance(element, Mapping):
            continue
        kind = element.get("type")
        if kind == "text":
            text = str(element.get("text", ""))
            code = (element.get("style") or {}).get("code")
            parts.append(f"`{text}`" if code else text)
        elif kind == "link":
            url, label = str(element.get("url", "")), element.get("text")
            parts.append(f"{label} ({url})" if label and label != url else url)
        elif kind == "user":
            parts.append(f"@{element.get('user_id', '')}")
        elif kind == "channel":
            parts.append(f"#{element.get('channel_id', '')}")
        elif kind == "usergroup":
            parts.append(f"@{element.get('usergroup_id', '')}")
        elif kind == "emoji":
            parts.append(f":{element.get('name', '')}:")
        elif kind == "broadcast":
            parts.append(f"@{element.get('range', '')}")
        elif kind == "date":
            parts.append(str(element.get("fallback", element.get("timestamp", ""))))
    return "".join(parts)
