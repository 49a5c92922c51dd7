"""The messages of a request body, spliced from their stored JSON and kept between calls.

A session's requests repeat their history: request *n+1* sends request *n*'s messages
and a few more. Each message between the first and the last goes out as the canonical
JSON it was stored as (``Message.json_bytes``, encoded once per message); the first and
the last carry cache breakpoints and are built per call (``request.build_request``).
``MessagesMemo`` keeps the joined text of a request's middle messages, so the next
request of the same session joins only the messages added since: a model call costs
its new messages, not its session's length (docs/architecture.md §4, ``bench/growth.py``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.model.messages import Message

MEMO_SESSIONS = 16
"""Histories a memo keeps (the most recently used); each holds its joined text."""
MIN_MEMO_MESSAGES = 32
"""Shorter histories are joined afresh: they cost less than keeping them."""


@dataclass(frozen=True)
class _Joined:
    """The joined JSON ``text`` (UTF-8) of ``messages``, as rendered for ``tools``."""

    messages: tuple[Message, ...]
    tools: object
    text: bytes


class MessagesMemo:
    """The last few histories' joined middle messages, by their first message.

    A kept history is reused only when it is, message for message (the same objects),
    a prefix of the new one, and was rendered for the same tools: anything else (a
    compaction, a changed tool list, another session) joins afresh. Safe to share
    between threads.
    """

    def __init__(self, sessions: int = MEMO_SESSIONS) -> None:
        """Keep at most ``sessions`` histories."""
        self._sessions = sessions
        self._kept: OrderedDict[int, _Joined] = OrderedDict()
        self._lock = threading.Lock()

    def join(
        self, middle: Sequence[Message], tools: object, render: Callable[[Message], bytes]
    ) -> bytes:
        """``b",".join(render(m) for m in middle)``, reusing a kept prefix of ``middle``.

        ``tools`` is any value, compared with ``==``, that stands for what ``render``
        depends on besides the message (the request's tool names).
        """
        if len(middle) < MIN_MEMO_MESSAGES:
            return b",".join(render(m) for m in middle)
        messages = tuple(middle)
        key = id(messages[0])
        with self._lock:
            kept = self._kept.get(key)
        text, start = b"", 0
        if kept is not None and _extends(kept, messages, tools):
            text, start = kept.text, len(kept.messages)
        added = b",".join(render(m) for m in messages[start:])
        text = text + b"," + added if text and added else text or added
        with self._lock:
            self._kept[key] = _Joined(messages, tools, text)
            self._kept.move_to_end(key)
            while len(self._kept) > self._sessions:
                self._kept.popitem(last=False)
        return text


def _extends(kept: _Joined, messages: tuple[Message, ...], tools: object) -> bool:
    """Whether ``messages`` starts with the very messages ``kept`` joined, for ``tools``.

    The kept tuple holds its messages, so their ids cannot be reused; the tuple
    comparison checks identity first, element by element, at C speed.
    """
    n = len(kept.messages)
    return n <= len(messages) and kept.tools == tools and messages[:n] == kept.messages
