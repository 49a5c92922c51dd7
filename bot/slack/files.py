"""The content of small text files shared in Slack, for the agent to read.

A file object (docs.slack.dev, "Reference: file object") carries ``url_private_download``;
Slack serves it to the bot's token (``Authorization: Bearer xoxb-…``, scope
``files:read``). Without a valid token Slack answers 200 with its HTML sign-in page, so
an HTML answer counts as "not readable". Only text files up to ``MAX_FILE_BYTES`` are
fetched; the rest are shown by name, type and size (``content.file_line``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import aiohttp

from bot.slack.content import file_line

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 32_000
TIMEOUT_S = 10.0
_TEXT_TYPES = frozenset({"text", "csv", "json", "yaml", "xml", "markdown", "log", "shell"})


def is_small_text(file: Mapping[str, Any]) -> bool:
    """A text file (``mimetype`` ``text/*`` or a text ``filetype``) of ≤ ``MAX_FILE_BYTES``.

    >>> is_small_text({"mimetype": "text/plain", "size": 96, "url_private_download": "u"})
    True
    >>> is_small_text({"mimetype": "image/png", "size": 96, "url_private_download": "u"})
    False
    """
    size = file.get("size")
    texty = str(file.get("mimetype", "")).startswith("text/") or file.get("filetype") in _TEXT_TYPES
    url = file.get("url_private_download") or file.get("url_private")
    return bool(texty and url and isinstance(size, int) and 0 < size <= MAX_FILE_BYTES)


async def file_contents(token: str, files: tuple[Mapping[str, Any], ...]) -> str | None:
    """The contents of the small text files among ``files``, one fenced block each, or
    None when none could be read (failures are logged, never raised)."""
    parts = []
    for file in files:
        if is_small_text(file) and (text := await _download(token, file)) is not None:
            parts.append(f"Contents of {file_line(file)}:\n```\n{text.rstrip()}\n```")
    return "\n\n".join(parts) or None


async def _download(token: str, file: Mapping[str, Any]) -> str | None:
    url = str(file.get("url_private_download") or file.get("url_private"))
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session,
            session.get(url, headers=headers) as answer,
        ):
            body = await answer.content.read(MAX_FILE_BYTES + 1)
            refused = answer.status != 200 or answer.content_type == "text/html"
    except (aiohttp.ClientError, TimeoutError) as exc:
        logger.warning("file %s not fetched: %s", file.get("id"), exc)
        return None
    if refused:
        logger.warning("file %s not readable with the bot token (files:read?)", file.get("id"))
        return None
    return body[:MAX_FILE_BYTES].decode("utf-8", errors="replace")
