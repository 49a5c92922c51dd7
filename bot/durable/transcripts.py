"""A worker's session transcripts: decoded once, cached between its own steps, stored as deltas.

The store keeps a session's transcript as rows written once (``TranscriptDelta``) and
its small state apart (``Checkpoint.state_json``). A step here:

1. claims with the mark of the transcript this worker cached for the session (if
   any), so the claim carries only the rows the cache lacks — none when this worker
   ran the session's previous step (the epoch follows on);
2. rebuilds the checkpoint from the state and the cached + read messages (a read
   message's blocks are decoded only when the step reads them: ``Message.from_stored``);
3. stores with each ``save``/``commit`` only the messages added since the last write
   (a compaction, which rewrites the transcript, stores it whole as a new
   generation);
4. caches the committed transcript under the commit's mark.

A checkpoint written by ``Checkpoint.to_json`` (messages inside, as sessions opened
before this storage, or seeded by tests) is read as is; its first write stores its
messages as rows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from harness import Checkpoint, Message, holds_messages
from memory_store import Claim, TranscriptDelta, TranscriptMark

ReadAll = Callable[[str], Awaitable[tuple[str, ...]]]


@dataclass
class StoredTranscript:
    """What of one claim's transcript is stored: ``messages`` up to ``mark``.

    ``rewrite`` forces the next write to start a new generation (the stored rows are
    not a prefix of what the claim holds).
    """

    mark: TranscriptMark
    messages: tuple[Message, ...]
    rewrite: bool = False

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
            self.mark = delta.after(self.mark.epoch)
            self.messages = tuple(messages)
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

    async def load(self, claim: Claim, read_all: ReadAll) -> tuple[Checkpoint, StoredTranscript]:
        """The claim's checkpoint and what of its transcript is stored.

        ``read_all(session_id)`` (``SessionStore.transcript``) is used only when the
        cache lost the prefix the claim counted on.

        Raises:
            harness.InvalidMessage: a malformed state or message.
        """
        mark = claim.transcript_mark()
        if holds_messages(claim.checkpoint):
            cp = Checkpoint.from_json(claim.checkpoint)
            return cp, StoredTranscript(mark, (), rewrite=claim.transcript_length > 0)
        rows: Sequence[str] = claim.transcript
        prefix: tuple[Message, ...] = ()
        if claim.transcript_from > 0:
            entry = self._entries.get(claim.session_id)
            if entry is not None and entry.mark.generation == claim.transcript_generation:
                prefix = entry.messages[: claim.transcript_from]
            if len(prefix) != claim.transcript_from:
                prefix, rows = (), await read_all(claim.session_id)
        messages = prefix + tuple(map(Message.from_stored, rows))
        return Checkpoint.from_json(claim.checkpoint, messages=messages), StoredTranscript(
            mark, messages
        )

    def keep(self, session_id: str, stored: StoredTranscript) -> None:
        """Cache a committed transcript."""
        if self._max <= 0:
            return
        self._entries[session_id] = StoredTranscript(stored.mark, stored.messages)
        self._entries.move_to_end(session_id)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop a session (its step failed or was fenced: the cache may be stale)."""
        self._entries.pop(session_id, None)


def _extends(messages: Sequence[Message], prefix: Sequence[Message]) -> bool:
    """Whether ``messages`` starts with ``prefix`` (identity first: steps append).

    A tuple comparison: element by element, identity before equality, at C speed, so a
    long session's step does not walk its history in Python."""
    if len(messages) < len(prefix):
        return False
    return tuple(messages[: len(prefix)]) == tuple(prefix)


def _encoded(messages: Sequence[Message]) -> tuple[str, ...]:
    return tuple(m.to_json() for m in messages)
