"""A worker's session transcripts: decoded where read, cached between steps, stored as deltas.

The store keeps a session's transcript as rows written once (``TranscriptDelta``) and
its small state apart (``Checkpoint.state_json``). A step here:

1. claims with the mark of the transcript this worker cached for the session (if
   any), else of the copy the deployment's Redis keeps of it (``shared_transcripts``),
   so the claim carries only the rows the cache lacks — none when this worker ran the
   session's previous step (the epoch follows on), or the copy is up to date;
2. rebuilds the checkpoint from the state and the cached + read messages: the read
   ones as a ``harness.Transcript``, whose messages are decoded only when the step reads
   them, and which a model call sends as the stored texts it holds (a cold step on a
   long session decodes and renders none of its history);
3. stores with each ``save``/``commit`` only the messages added since the last write
   (a compaction, which rewrites the transcript, stores it whole as a new
   generation);
4. caches the committed transcript under the commit's mark (and, when it hands the
   session on, adds to the shared copy the rows it lacks: the driver).

A checkpoint written by ``Checkpoint.to_json`` (messages inside, as sessions opened
before this storage, or seeded by tests) is read as is; its first write stores its
messages as rows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness import (
    Checkpoint,
    Message,
    StoredMessages,
    Transcript,
    appended,
    holds_messages,
)
from memory_store import Claim, TranscriptDelta, TranscriptMark

if TYPE_CHECKING:
    from bot.durable.shared_transcripts import SharedCopy

ReadAll = Callable[[str], Awaitable[tuple[str, ...]]]


@dataclass
class StoredTranscript:
    """What of one claim's transcript is stored: ``messages`` up to ``mark``.

    ``rewrite`` forces the next write to start a new generation (the stored rows are
    not a prefix of what the claim holds). ``shared``: how many of them the shared copy
    (``shared_transcripts``) was last known to hold (0: none, or not known).
    """

    mark: TranscriptMark
    messages: Sequence[Message]
    rewrite: bool = False
    shared: int = 0

    def delta(self, messages: Sequence[Message]) -> TranscriptDelta | None:
        """What to store so the transcript becomes ``messages`` (None: nothing new)."""
        known = self.messages
        if not self.rewrite and _extends(messages, known):
            if len(messages) == len(known):
                return None
            added = messages[len(known) :]
            return TranscriptDelta(self.mark, self.mark.generation, _encoded(added))
        return TranscriptDelta(self.mark, self.mark.generation + 1, _encoded(messages))

    def stored(self, delta: TranscriptDelta | None, messages: Sequence[Message]) -> None:
        """Record that ``delta`` (the result of ``delta(messages)``) was stored."""
        if delta is not None:
            if delta.generation != self.mark.generation:
                self.shared = 0  # the copy holds another transcript
            self.mark = delta.after(self.mark.epoch)
            self.messages = messages if isinstance(messages, Transcript) else tuple(messages)
            self.rewrite = False


class TranscriptCache:
    """Decoded transcripts of the sessions this worker stepped last (least recently used
    dropped beyond ``max_sessions``)."""

    def __init__(self, max_sessions: int = 64) -> None:
        """Keep at most ``max_sessions`` (≥ 0; 0 caches nothing)."""
        self._max = max_sessions
        self._entries: OrderedDict[str, StoredTranscript] = OrderedDict()

    def mark(self, session_id: str) -> TranscriptMark | None:
        """The mark to pass to ``SessionStore.claim`` for ``session_id``."""
        entry = self._entries.get(session_id)
        return entry.mark if entry is not None else None

    async def load(
        self, claim: Claim, read_all: ReadAll, copy: SharedCopy | None = None
    ) -> tuple[Checkpoint, StoredTranscript]:
        """The claim's checkpoint and what of its transcript is stored.

        The transcript's first ``claim.transcript_from`` messages come from this cache,
        else from ``copy`` (the shared copy the claim was made with, when this cache had
        none). ``read_all(session_id)`` (``SessionStore.transcript``) is used only when
        both lost the prefix the claim counted on.

        Raises:
            harness.InvalidMessage: a malformed state or message.
        """
        mark = claim.transcript_mark()
        if holds_messages(claim.checkpoint):
            cp = Checkpoint.from_json(claim.checkpoint)
            return cp, StoredTranscript(mark, (), rewrite=claim.transcript_length > 0)
        rows: Sequence[str] = claim.transcript
        prefix: Sequence[Message] = ()
        shared = 0
        if claim.transcript_from > 0:
            entry = self._entries.get(claim.session_id)
            if entry is not None and entry.mark.generation == claim.transcript_generation:
                prefix, shared = entry.messages[: claim.transcript_from], entry.shared
            elif copy is not None and copy.generation == claim.transcript_generation:
                prefix, shared = Transcript(copy.stored)[: claim.transcript_from], len(copy.stored)
            if len(prefix) != claim.transcript_from:
                prefix, rows, shared = (), await read_all(claim.session_id), 0
        messages = _with_rows(prefix, rows)
        return Checkpoint.from_json(claim.checkpoint, messages=messages), StoredTranscript(
            mark, messages, shared=min(shared, len(messages))
        )

    def keep(self, session_id: str, stored: StoredTranscript) -> None:
        """Cache a committed transcript."""
        if self._max <= 0:
            return
        self._entries[session_id] = StoredTranscript(
            stored.mark, stored.messages, shared=stored.shared
        )
        self._entries.move_to_end(session_id)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop a session (its step failed or was fenced: the cache may be stale)."""
        self._entries.pop(session_id, None)


def _with_rows(prefix: Sequence[Message], rows: Sequence[str]) -> Sequence[Message]:
    """``prefix`` (cached) then the messages stored as ``rows``, none of them decoded."""
    if not rows:
        return prefix
    if not prefix:
        return Transcript(StoredMessages.of_texts(rows))
    return appended(prefix, *map(Message.from_stored, rows))


def _extends(messages: Sequence[Message], prefix: Sequence[Message]) -> bool:
    """Whether ``messages`` starts with ``prefix`` (identity first: steps append).

    A tuple comparison: element by element, identity before equality, at C speed, or a
    ``Transcript``'s own (``starts_with``: nothing decoded when they share the stored
    run), so a long session's step does not walk its history in Python."""
    if len(messages) < len(prefix):
        return False
    if isinstance(messages, Transcript):
        return messages.starts_with(prefix)
    return tuple(messages[: len(prefix)]) == tuple(prefix)


def _encoded(messages: Sequence[Message]) -> tuple[str, ...]:
    return tuple(m.to_json() for m in messages)
