"""What people see of a Slack message, as plain text for the model.

A message is more than its ``text``: apps (PagerDuty, Datadog, Grafana, GitHub,
CircleCI) post Block Kit ``blocks`` and legacy ``attachments`` (``pretext``,
``title``, ``text``, ``fields``, ``fallback``) and often leave ``text`` empty or a
one-line summary; a forwarded message or a share is an attachment marked
``is_share``/``is_msg_unfurl`` (author, channel, the shared text and its
``message_blocks``); an upload is in ``files`` (``name``, ``filetype``,
``mimetype``, ``size``). Shapes: docs.slack.dev, "Message payloads", "Legacy
secondary attachments", "Reference: file object".

``rich_text`` blocks repeat what ``text`` says for a person's message, so they are
read only when ``text`` is empty. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bot.slack.text import clean_text

JsonMap = Mapping[str, Any]


def message_content(message: JsonMap, *, bot_user_id: str) -> str:
    """The text, blocks, attachments and file list of ``message``, made plain.

    >>> message_content({"text": "", "attachments": [{"pretext": "[acme/api] CI failed",
    ...     "title": "build #42", "fields": [{"title": "Branch", "value": "main"}]}]},
    ...     bot_user_id="U0BOT")
    '[acme/api] CI failed\\nbuild #42\\nBranch: main'
    """
    raw = str(message.get("text") or "")
    text = clean_text(raw, bot_user_id=bot_user_id)
    parts = [text] if text else []
    blocks = blocks_text(message.get("blocks"), with_rich_text=not raw.strip())
    parts.extend(_new(parts, clean_text(blocks, bot_user_id=bot_user_id)))
    for attachment in _dicts(message.get("attachments")):
        parts.extend(_new(parts, _attachment(attachment, bot_user_id)))
    files = [file_line(f) for f in _dicts(message.get("files"))]
    parts.extend(files)
    return "\n".join(p for p in parts if p).strip()


def blocks_text(blocks: Any, *, with_rich_text: bool = True) -> str:
    """The readable text of Block Kit ``blocks`` (sections, fields, headers, context,
    markdown, rich text), one block a line.

    >>> blocks_text([{"type": "header", "text": {"type": "plain_text", "text": "P1"}},
    ...   {"type": "section", "fields": [{"type": "mrkdwn", "text": "*Service:* api"}]}])
    'P1\\n*Service:* api'
    """
    lines = []
    for block in _dicts(blocks):
        kind = block.get("type")
        if kind == "rich_text" and not with_rich_text:
            continue
        line = "\n".join(t for t in _block_texts(block) if t)
        if line:
            lines.append(line)
    return "\n".join(lines)


def file_line(file: JsonMap) -> str:
    """``[file: name (type, size)]`` for a file object.

    >>> file_line({"name": "pods.log", "filetype": "text", "size": 2048})
    '[file: pods.log (text, 2.0 KB)]'
    """
    name = str(file.get("name") or file.get("title") or "file")
    kind = str(file.get("filetype") or file.get("mimetype") or "unknown type")
    size = file.get("size")
    shown = _size(int(size)) if isinstance(size, int) else "size unknown"
    return f"[file: {name} ({kind}, {shown})]"


def _block_texts(block: JsonMap) -> Iterable[str]:
    text = block.get("text")
    if isinstance(text, str):  # a ``markdown`` block
        yield text
    elif isinstance(text, Mapping):
        yield str(text.get("text") or "")
    for field in _dicts(block.get("fields")):
        yield str(field.get("text") or "")
    if block.get("type") in ("context", "rich_text", "rich_text_section", "rich_text_list"):
        yield " ".join(_inline(block.get("elements")))


def _inline(elements: Any) -> Iterable[str]:
    """Texts of context elements and rich text runs, depth first."""
    for element in _dicts(elements):
        kind = element.get("type")
        if kind in ("text", "plain_text", "mrkdwn"):
            yield str(element.get("text") or "")
        elif kind == "link":
            yield str(element.get("text") or element.get("url") or "")
        elif kind == "user":
            yield f"<@{element.get('user_id', '')}>"
        elif kind == "channel":
            yield f"<#{element.get('channel_id', '')}>"
        elif kind == "emoji":
            yield f":{element.get('name', '')}:"
        elif "elements" in element:
            yield "".join(_inline(element.get("elements")))


def _attachment(attachment: JsonMap, bot_user_id: str) -> str:
    if attachment.get("is_share") or attachment.get("is_msg_unfurl"):
        return _shared(attachment, bot_user_id)
    lines = [str(attachment.get(k) or "") for k in ("pretext", "author_name", "title", "text")]
    lines.extend(
        f"{f.get('title', '')}: {f.get('value', '')}".strip(": ")
        for f in _dicts(attachment.get("fields"))
    )
    lines.append(blocks_text(attachment.get("blocks")))
    body = "\n".join(clean_text(line, bot_user_id=bot_user_id) for line in lines if line)
    if not body:
        body = clean_text(str(attachment.get("fallback") or ""), bot_user_id=bot_user_id)
    return body


def _shared(attachment: JsonMap, bot_user_id: str) -> str:
    who = attachment.get("author_name") or attachment.get("author_subname") or "someone"
    where = attachment.get("channel_name")
    head = f"[forwarded message from {who}" + (f" in #{where}" if where else "") + "]"
    raw = str(attachment.get("text") or "")
    body = clean_text(raw, bot_user_id=bot_user_id)
    if not body:
        shared_blocks = [b for m in _dicts(attachment.get("message_blocks")) for b in _blocks(m)]
        body = blocks_text(shared_blocks) or str(attachment.get("fallback") or "")
        body = clean_text(body, bot_user_id=bot_user_id)
    files = [file_line(f) for f in _dicts(attachment.get("files"))]
    return "\n".join([head, body, *files]).strip()


def _blocks(shared: JsonMap) -> Sequence[JsonMap]:
    message = shared.get("message") or {}
    return list(_dicts(message.get("blocks") if isinstance(message, Mapping) else None))


def _new(seen: Sequence[str], part: str) -> list[str]:
    """``[part]`` unless it is empty or already said (an app's ``text`` often repeats
    its first block)."""
    part = part.strip()
    return [part] if part and all(part != s.strip() for s in seen) else []


def _dicts(value: Any) -> list[JsonMap]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
