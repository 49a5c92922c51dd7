"""An alerting app's Slack message, read into plain parts: sender, title, fields, links.

Apps post their alerts in legacy ``attachments`` (``title``, ``title_link``,
``pretext``, ``text``, ``fields``, ``fallback``, ``color``, ``footer``, ``actions``),
in Block Kit (``header``/``section`` text and ``fields``, ``context``, buttons with a
``url``), or in attachments that hold blocks (docs.slack.dev, "Legacy secondary
attachments", "Block Kit"); ``text`` is often empty or a one-line summary. Nothing
here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.slack.content import message_content
from bot.slack.text import clean_text

JsonMap = Mapping[str, Any]

_LINK = re.compile(r"<((?:https?):[^|>\s]+)(?:\|([^>]*))?>")
_BOLD_FIELD = re.compile(r"^\*([^*:\n]{1,60}):?\*:?\s*(.*)$", re.DOTALL)
_MARKS = re.compile(r"[*_~`]")


@dataclass(frozen=True)
class Sender:
    """Who posted a message: a bot or app (never a person).

    Attributes:
        bot_id: ``bot_id`` (``B…``); "" when Slack gave none.
        app_id: ``app_id`` or ``bot_profile.app_id`` (``A…``); "" when none.
        name: ``bot_profile.name`` or ``username`` (an incoming webhook's), or "".
    """

    bot_id: str
    app_id: str
    name: str

    @property
    def ids(self) -> frozenset[str]:
        """The ids an allow-list may name."""
        return frozenset(i for i in (self.bot_id, self.app_id) if i)


@dataclass(frozen=True)
class MessageView:
    """A message's parts, markup made plain (``view_of``).

    Attributes:
        sender: the app that posted it.
        title: the first of: an attachment's ``title``, a ``header`` block, the first
            section's text, the first line of ``text``, a ``fallback``.
        pretexts: the attachments' ``pretext`` lines and ``fallback``s.
        fields: ``title: value`` pairs of attachment fields and ``*Name:* value``
            section fields, in order (first wins on a repeated name).
        links: ``(label, url)`` pairs: title links, links in the text, button URLs.
        footers: attachment footers (``Grafana v11.3.1``, ``Datadog``…).
        content: everything people see of the message (``message_content``).
    """

    sender: Sender
    title: str
    pretexts: tuple[str, ...]
    fields: Mapping[str, str]
    links: tuple[tuple[str, str], ...]
    footers: tuple[str, ...]
    content: str

    def field(self, *names: str) -> str:
        """The first field whose name is one of ``names`` (any case), or ""."""
        wanted = {n.lower() for n in names}
        return next((v for k, v in self.fields.items() if k.lower() in wanted), "")

    def link_matching(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        """The first link URL ``pattern`` finds something in."""
        return next((m for _, url in self.links if (m := pattern.search(url))), None)


def sender_of(message: JsonMap) -> Sender | None:
    """The bot or app that posted ``message``; None for a person's message.

    A message is a bot's when it has a ``bot_id`` or the ``bot_message`` subtype
    (docs.slack.dev, "bot_message" subtype; ``bot_profile`` names the app).

    >>> sender_of({"bot_id": "B1", "bot_profile": {"app_id": "A1", "name": "Grafana"}})
    Sender(bot_id='B1', app_id='A1', name='Grafana')
    >>> sender_of({"user": "U1", "text": "hi"}) is None
    True
    """
    if not message.get("bot_id") and message.get("subtype") != "bot_message":
        return None
    profile = message.get("bot_profile") or {}
    return Sender(
        bot_id=str(message.get("bot_id") or profile.get("id") or ""),
        app_id=str(message.get("app_id") or profile.get("app_id") or ""),
        name=str(profile.get("name") or message.get("username") or ""),
    )


def view_of(message: JsonMap, sender: Sender, *, bot_user_id: str) -> MessageView:
    """Read ``message`` (a ``message`` event or a stored message) into its parts."""
    attachments = _dicts(message.get("attachments"))
    blocks = _dicts(message.get("blocks")) + [
        b for a in attachments for b in _dicts(a.get("blocks"))
    ]
    fields: dict[str, str] = {}
    for name, value in _field_pairs(attachments, blocks):
        if name and value and name not in fields:
            fields[name] = value
    return MessageView(
        sender=sender,
        title=_title(message, attachments, blocks),
        pretexts=tuple(
            _plain(str(a.get(k) or ""))
            for a in attachments
            for k in ("pretext", "fallback")
            if a.get(k)
        ),
        fields=fields,
        links=tuple(_links(message, attachments, blocks)),
        footers=tuple(_plain(str(a["footer"])) for a in attachments if a.get("footer")),
        content=message_content(message, bot_user_id=bot_user_id),
    )


def plain(text: str) -> str:
    """Slack markup as one plain line: links as their label, no ``*_~``` marks.

    >>> plain("*<https://x.io/i/1|[#4821] db slow>*")
    '[#4821] db slow'
    """
    return _plain(text)


def _title(message: JsonMap, attachments: list[JsonMap], blocks: list[JsonMap]) -> str:
    candidates = [str(a.get("title") or "") for a in attachments]
    candidates += [_block_text(b) for b in blocks if b.get("type") == "header"]
    candidates += [_block_text(b) for b in blocks if b.get("type") == "section"]
    candidates += [str(message.get("text") or "")]
    candidates += [str(a.get("fallback") or "") for a in attachments]
    for candidate in candidates:
        line = next((ln for ln in candidate.splitlines() if ln.strip()), "")
        if _plain(line):
            return _plain(line)
    return ""


def _field_pairs(attachments: list[JsonMap], blocks: list[JsonMap]) -> Iterable[tuple[str, str]]:
    for attachment in attachments:
        for f in _dicts(attachment.get("fields")):
            yield _plain(str(f.get("title") or "")), _plain(str(f.get("value") or ""))
    for block in blocks:
        for f in _dicts(block.get("fields")):
            found = _BOLD_FIELD.match(str(f.get("text") or "").strip())
            if found:
                yield _plain(found.group(1)), _plain(found.group(2))


def _links(
    message: JsonMap, attachments: list[JsonMap], blocks: list[JsonMap]
) -> Iterable[tuple[str, str]]:
    seen: set[str] = set()
    raw: list[tuple[str, str]] = []
    for a in attachments:
        if a.get("title_link"):
            raw.append((_plain(str(a.get("title") or "link")), str(a["title_link"])))
        for action in _dicts(a.get("actions")):
            if action.get("url"):
                raw.append((_plain(str(action.get("text") or "link")), str(action["url"])))
    texts = [str(message.get("text") or "")]
    texts += [str(a.get(k) or "") for a in attachments for k in ("pretext", "text", "footer")]
    texts += [str(f.get("value") or "") for a in attachments for f in _dicts(a.get("fields"))]
    texts += [_block_text(b) for b in blocks]
    texts += [str(f.get("text") or "") for b in blocks for f in _dicts(b.get("fields"))]
    for text in texts:
        raw += [(_plain(m.group(2) or m.group(1)), m.group(1)) for m in _LINK.finditer(text)]
        raw += [(name, url) for name, url in _bare_urls(text)]
    for b in blocks:
        for element in _dicts(b.get("elements")) + ([b["accessory"]] if b.get("accessory") else []):
            if isinstance(element, Mapping) and element.get("url"):
                label = (element.get("text") or {}).get("text") or "link"
                raw.append((_plain(str(label)), str(element["url"])))
    for label, url in raw:
        if url not in seen:
            seen.add(url)
            yield label or "link", url


_BARE = re.compile(r"(?<![<|(])\b(?:(\w[\w ]{0,30}):\s+)?(https?://[^\s<>|)]+)")


def _bare_urls(text: str) -> Iterable[tuple[str, str]]:
    """``Source: https://…`` lines (Grafana's default message) and other bare URLs."""
    without_markup = _LINK.sub("", text)
    for m in _BARE.finditer(without_markup):
        yield (m.group(1) or "link").strip(), m.group(2)


def _block_text(block: JsonMap) -> str:
    text = block.get("text")
    if isinstance(text, Mapping):
        return str(text.get("text") or "")
    return str(text or "")


def _plain(text: str) -> str:
    linked = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    cleaned = clean_text(linked, bot_user_id="")
    return " ".join(_MARKS.sub("", cleaned).split())


def _dicts(value: Any) -> list[JsonMap]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
