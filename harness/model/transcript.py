"""A transcript read from the store, decoded only where it is read.

A step on a process that did not run the session's previous step reads the session's
whole transcript, but uses little of it: a tool step reads the last message, a model
step sends the history as it was stored (``request.build_request`` splices each
message's canonical JSON). ``StoredMessages`` holds the stored JSON texts of a run of
messages and makes a ``Message`` of one only when it is read (``Message.from_stored``,
kept then, so a message read twice is the same object); ``stored_json`` gives the
joined JSON of a range of them as the request needs it, without making any message.
``Transcript`` is the ``Sequence[Message]`` a checkpoint holds: a prefix of such a
run, then the messages the session added since, in memory (``appended``).

The request's bytes are the same either way: a stored message's ``json_bytes`` is its
stored text (``Message.from_stored``), and its text is what ``Message.to_json`` wrote.

>>> from harness.model.messages import TextBlock
>>> stored = StoredMessages.of_texts(
...     ['{"role":"user","content":[{"type":"text","text":"hi"}]}',
...      '{"role":"assistant","content":[{"type":"text","text":"hello"}]}'])
>>> t = Transcript(stored)
>>> len(t), t.decoded()
(2, 0)
>>> t[-1].content
(TextBlock(text='hello'),)
>>> t.decoded()
1
>>> longer = appended(t, Message("user", (TextBlock("thanks"),)))
>>> type(longer).__name__, len(longer), longer.starts_with(t)
('Transcript', 3, True)
>>> stored.joined(0, 2) == b",".join(m.json_bytes for m in longer[:2])
True
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import overload

from harness.model.messages import Message

_OPENINGS = ('{"role":"user","content":[', '{"role":"assistant","content":[')
_REFERENCE = '"tool_reference"'
_REFERENCED = operator.attrgetter("referenced_tools")
_JOINED_KEPT = 8
"""Ranges of a stored run whose joined texts are kept (a request asks for one, or one
more per message whose reference it rewrites)."""


class StoredMessages:
    """The stored JSON texts of consecutive messages (``Message.to_json``'s, oldest first),
    each decoded on first read.

    Two shapes, the same behaviour: the texts themselves (``of_texts``: a claim's rows)
    or their UTF-8 joined with commas and each one's length in bytes (``of_joined``: a
    copy kept where every worker reads it). Safe to read from several threads (a message
    decoded twice at once is kept once).
    """

    __slots__ = (
        "_canonical",
        "_decoded",
        "_joined_cache",
        "_lengths",
        "_raw",
        "_referenced",
        "_texts",
    )

    def __init__(
        self,
        texts: Sequence[str] | None,
        raw: bytes | None = None,
        lengths: Sequence[int] | None = None,
    ) -> None:
        """Use ``of_texts`` or ``of_joined``."""
        self._texts = texts
        self._raw = raw
        self._lengths = lengths
        count = len(texts) if texts is not None else len(lengths or ())
        self._decoded: list[Message | None] = [None] * count
        self._canonical: bool | None = None  # each text is its message's json_bytes
        self._referenced: bool | None = None  # some text holds a tool_reference
        self._joined_cache: dict[tuple[int, int], bytes] = {}

    @classmethod
    def of_texts(cls, texts: Sequence[str]) -> StoredMessages:
        """The messages whose stored JSON is ``texts``, in order."""
        return cls(tuple(texts))

    @classmethod
    def of_joined(
        cls,
        raw: bytes,
        lengths: Sequence[int],
        *,
        canonical: bool | None = None,
        referenced: bool | None = None,
    ) -> StoredMessages:
        """The messages whose stored JSON, UTF-8, is ``raw`` split by ``lengths`` (bytes):
        ``raw == b",".join(texts)`` with ``len(texts[i]) == lengths[i]``. A text's place
        in ``raw`` is summed from ``lengths`` when it is read, from the nearer end.

        What the writer vouches for, so that nothing need look (None: it looks, once):
        ``canonical=True``, each text is its message's ``json_bytes`` (``encoded_after``
        writes only such texts); ``referenced``, whether some text holds a
        ``tool_reference``.

        Raises:
            ValueError: ``raw`` is not as long as ``lengths`` and the commas say.
        """
        if len(raw) != (sum(lengths) + len(lengths) - 1 if lengths else 0):
            raise ValueError(
                f"{len(raw)} bytes do not hold {len(lengths)} messages of those lengths"
            )
        stored = cls(None, raw, lengths)
        stored._canonical = canonical
        stored._referenced = referenced
        return stored

    def __len__(self) -> int:
        return len(self._decoded)

    def text(self, index: int) -> str:
        """The stored JSON of message ``index`` (0 ≤ index < len)."""
        if self._texts is not None:
            return self._texts[index]
        assert self._raw is not None
        assert self._lengths is not None
        start = self._start(index)
        return self._raw[start : start + self._lengths[index]].decode()

    def message(self, index: int) -> Message:
        """Message ``index``, decoded on first read, then the same object every time.

        Raises:
            IndexError: ``index`` is out of range (a negative one is not taken).
            InvalidMessage: its stored JSON is malformed.
        """
        if index < 0:
            raise IndexError(index)
        decoded = self._decoded[index]
        if decoded is None:
            decoded = Message.from_stored(self.text(index))
            # another thread may have decoded it meanwhile: keep the first one
            decoded = self._decoded[index] or decoded
            self._decoded[index] = decoded
        return decoded

    def decoded(self) -> int:
        """How many messages were decoded so far."""
        return len(self._decoded) - self._decoded.count(None)

    def joined(self, start: int, stop: int) -> bytes:
        """``b",".join(m.json_bytes for m in messages[start:stop])``, from the texts alone.

        Meant for messages in the stored shape (``canonical``); the ranges asked last are
        kept (a warm session's requests ask for the same ones, step after step).
        """
        if stop <= start:
            return b""
        joined = self._joined_cache.get((start, stop))
        if joined is not None:
            return joined
        if self._texts is not None:
            joined = ",".join(self._texts[start:stop]).encode()
        else:
            assert self._raw is not None
            joined = self._raw[self._start(start) : self._end(stop - 1)]
        if len(self._joined_cache) >= _JOINED_KEPT:
            self._joined_cache.clear()
        self._joined_cache[start, stop] = joined
        return joined

    def encoded(self, start: int, stop: int) -> tuple[bytes, list[int]]:
        """``joined(start, stop)`` (not kept) and each message's text's length in UTF-8
        bytes: what ``of_joined`` takes back."""
        if stop <= start:
            return b"", []
        if self._texts is None:
            assert self._lengths is not None
            return self.joined(start, stop), list(self._lengths[start:stop])
        texts = self._texts[start:stop]
        joined = ",".join(texts).encode()
        if joined.isascii():
            return joined, list(map(len, texts))
        return joined, list(map(len, map(str.encode, texts)))

    def canonical(self) -> bool:
        """Whether each message's ``json_bytes`` is its text, so ``joined`` is what the
        messages render: every text opens as ``Message.to_json`` writes it
        (``Message.from_stored`` keeps such a text as it is). Looked at once, at C speed:
        one opening per text, as canonical JSON holds it nowhere else (a tool input's
        keys are sorted, ``content`` before ``role``)."""
        if self._canonical is None:
            whole = self._whole_text()
            if isinstance(whole, bytes):
                openings = sum(whole.count(o.encode()) for o in _OPENINGS)
            else:
                openings = sum(whole.count(o) for o in _OPENINGS)
            self._canonical = openings == len(self)
        return self._canonical

    def referencing(self, start: int, stop: int) -> list[int]:
        """The indexes in ``[start, stop)`` of the messages whose JSON holds a
        ``tool_reference`` (the only ones ``Message.referenced_tools`` may find names in)."""
        if self._referenced is None:
            whole = self._whole_text()
            needle = _REFERENCE.encode() if isinstance(whole, bytes) else _REFERENCE
            self._referenced = needle in whole  # type: ignore[operator]  # like in like
        if not self._referenced:
            return []
        return [i for i in range(start, stop) if _REFERENCE in self.text(i)]

    def containing(self, needle: str, start: int, stop: int) -> list[int]:
        """The indexes in ``[start, stop)`` of the messages whose JSON holds ``needle``
        verbatim (as JSON escapes it)."""
        whole = self._whole_text()
        found = needle.encode() in whole if isinstance(whole, bytes) else needle in whole
        if not found:
            return []
        return [i for i in range(start, stop) if needle in self.text(i)]

    def _whole_text(self) -> str | bytes:
        return self._raw if self._raw is not None else ",".join(self._texts or ())

    def _start(self, index: int) -> int:
        """Where text ``index`` starts in ``raw``: after the texts before it and their
        commas, summed from whichever end is nearer (a step reads the first and the last
        messages)."""
        assert self._raw is not None
        assert self._lengths is not None
        count = len(self._lengths)
        if index <= count - index:
            return sum(self._lengths[:index]) + index
        after = sum(self._lengths[index:]) + (count - 1 - index)
        return len(self._raw) - after

    def _end(self, index: int) -> int:
        assert self._lengths is not None
        return self._start(index) + self._lengths[index]


class Transcript(Sequence[Message]):
    """Messages: the first ``stored_count`` of a ``StoredMessages`` (decoded when read),
    then ``tail`` (messages in memory). Immutable; ``appended`` and prefix slices share
    the stored part, so a step that adds a message decodes none of the history.

    Equal to any sequence of equal messages (a tuple among them); anything that walks it
    whole decodes it whole, so the hot paths ask it what they need instead
    (``stored_json``, ``referenced_tools``, ``containing``, ``starts_with``).
    """

    __slots__ = ("_count", "_stored", "_tail")

    def __init__(
        self, stored: StoredMessages, count: int | None = None, tail: tuple[Message, ...] = ()
    ) -> None:
        """``stored``'s first ``count`` messages (default: all), then ``tail``.

        Raises:
            ValueError: ``count`` is outside ``[0, len(stored)]``.
        """
        count = len(stored) if count is None else count
        if not 0 <= count <= len(stored):
            raise ValueError(f"count {count} outside [0, {len(stored)}]")
        self._stored = stored
        self._count = count
        self._tail = tail

    @property
    def stored(self) -> StoredMessages:
        """The stored run the first ``stored_count`` messages come from."""
        return self._stored

    @property
    def stored_count(self) -> int:
        """How many of the first messages are read from ``stored``."""
        return self._count

    @property
    def tail(self) -> tuple[Message, ...]:
        """The messages after the stored ones."""
        return self._tail

    def decoded(self) -> int:
        """How many stored messages were decoded so far (of the whole run)."""
        return self._stored.decoded()

    def __len__(self) -> int:
        return self._count + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        """A message, or a slice: a ``Transcript`` for a prefix (nothing decoded), a tuple
        of the tail's messages for a slice within it, else a tuple (decoding it)."""
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return tuple(self[i] for i in range(start, stop, step))
            stop = max(start, stop)
            if start == 0:
                kept = min(stop, self._count)
                return Transcript(self._stored, kept, self._tail[: stop - kept])
            if start >= self._count:
                return self._tail[start - self._count : stop - self._count]
            return tuple(self[i] for i in range(start, stop))
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("transcript index out of range")
        if index < self._count:
            return self._stored.message(index)
        return self._tail[index - self._count]

    def __iter__(self) -> Iterator[Message]:
        yield from map(self._stored.message, range(self._count))
        yield from self._tail

    def __reversed__(self) -> Iterator[Message]:
        yield from reversed(self._tail)
        yield from map(self._stored.message, range(self._count - 1, -1, -1))

    def __add__(self, other: Sequence[Message]) -> Transcript:
        """This transcript, then ``other``'s messages (the stored part shared)."""
        return Transcript(self._stored, self._count, self._tail + tuple(other))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        if len(other) != len(self):
            return False
        if isinstance(other, Transcript) and other.starts_with(self):
            return True
        return all(a is b or a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return (
            f"Transcript({self._count} stored ({self.decoded()} decoded), {len(self._tail)} added)"
        )

    def starts_with(self, prefix: Sequence[Message]) -> bool:
        """Whether this transcript's first messages are ``prefix``'s (identity first).

        Nothing is decoded when ``prefix`` shares this transcript's stored run as far as
        its own stored part goes (a transcript and the longer ones made from it)."""
        if len(prefix) > len(self):
            return False
        if isinstance(prefix, Transcript) and prefix._stored is self._stored:
            if prefix._count == self._count:
                return self._tail[: len(prefix._tail)] == prefix._tail
            if prefix._count < self._count and not prefix._tail:
                return True
        head = self[: len(prefix)]
        return all(a is b or a == b for a, b in zip(head, prefix, strict=True))


def appended(messages: Sequence[Message], *added: Message) -> Sequence[Message]:
    """``messages`` then ``added``: a ``Transcript`` stays one (nothing decoded), any
    other sequence becomes a tuple."""
    if isinstance(messages, Transcript):
        return messages + added
    return (*messages, *added)


def stored_json(
    messages: Sequence[Message],
    start: int,
    stop: int,
    *,
    may_splice: Callable[[Message], bool],
    render: Callable[[Message], bytes],
) -> tuple[bytes, int]:
    """``b",".join(render(m) for m in messages[start:k])`` for the messages a
    ``Transcript`` holds as stored texts, and ``k`` (``start`` ≤ k ≤ stop): how far they
    reach. ``render`` must give a message's ``json_bytes`` unless ``may_splice`` refuses
    it: the texts are then joined as stored, nothing decoded, but for the messages with a
    ``tool_reference`` (decoded to ask ``may_splice``), rendered when refused.
    ``(b"", start)`` for another sequence, or texts not all in the stored shape."""
    if not isinstance(messages, Transcript):
        return b"", start
    stored, end = messages.stored, min(stop, messages.stored_count)
    if end <= start or not stored.canonical():
        return b"", start
    parts: list[bytes] = []
    run = start
    for i in stored.referencing(start, end):
        message = stored.message(i)
        if not may_splice(message):
            parts += (stored.joined(run, i), render(message))
            run = i + 1
    if not parts:
        return stored.joined(start, end), end
    parts.append(stored.joined(run, end))
    return b",".join(p for p in parts if p), end


def encoded_after(messages: Sequence[Message], start: int) -> tuple[bytes, list[int]]:
    """``b",".join(m.json_bytes for m in messages[start:])`` and each one's length in bytes
    (``StoredMessages.of_joined``'s arguments, with ``canonical=True``); a
    ``Transcript``'s stored messages from their texts, none decoded (unless a text is not
    its message's ``json_bytes``: ``StoredMessages.canonical``)."""
    parts: list[bytes] = []
    lengths: list[int] = []
    rest: Sequence[Message] = messages[start:]
    if (
        isinstance(messages, Transcript)
        and start < messages.stored_count
        and messages.stored.canonical()
    ):
        joined, lengths = messages.stored.encoded(start, messages.stored_count)
        parts.append(joined)
        rest = messages.tail
    added = [m.json_bytes for m in rest]
    parts += added
    lengths += map(len, added)
    return b",".join(parts), lengths


def referenced_tools(messages: Sequence[Message]) -> frozenset[str]:
    """The union of the messages' ``referenced_tools``; of a ``Transcript``'s stored
    messages, only those whose JSON holds a ``tool_reference`` are decoded."""
    if not isinstance(messages, Transcript):
        return frozenset().union(*map(_REFERENCED, messages))
    stored = messages.stored
    found = map(stored.message, stored.referencing(0, messages.stored_count))
    return frozenset().union(*map(_REFERENCED, found), *map(_REFERENCED, messages.tail))


def containing(messages: Sequence[Message], needle: str) -> Iterator[Message]:
    """The messages that may hold ``needle`` (as their JSON spells it), in order: of a
    ``Transcript``'s stored messages only those whose text holds it verbatim are decoded;
    any other message is given (the caller looks inside)."""
    if not isinstance(messages, Transcript):
        yield from messages
        return
    stored = messages.stored
    yield from map(stored.message, stored.containing(needle, 0, messages.stored_count))
    yield from messages.tail
