"""A copy of long sessions' stored transcripts in Redis, for the worker that lacks one.

A step on a process that did not run the session's previous step (``warroom worker``
runs two; a message may go to any host) has no cached transcript: reading a
3,000-message history from PostgreSQL costs more than the rest of the step. The
deployment's Redis (the broker's) keeps, per session, the stored JSON of its messages
joined as one value, as a model request sends them (``harness.StoredMessages.of_joined``):
such a step reads that one value, claims with its mark, and so reads from PostgreSQL only
the rows the copy lacks (usually none).

PostgreSQL stays the truth; the copy is only ever a prefix of it:

- rows are written once (a generation's row at a position never changes; a compaction
  starts a new generation), so a copy of generation *g* holding *n* messages is right
  for any claim of generation *g* and length ≥ *n*, which is all ``claim`` uses it for
  (``TranscriptMark``; anything else reads the rows, as without a copy);
- a worker adds to the copy only rows its commit stored, after the commit, and only
  where the copy ends where it expects (one server-side script: ``_PUT``), so two
  workers (one of them fenced) never interleave their rows; a new generation replaces
  an older one, never a later one;
- what is lost (Redis restarted, the copy expired or evicted, a worker died before
  adding its rows) is read from PostgreSQL and added back by the next step.

Each commit that hands the session on (to the queue, or to a wait) adds the rows the copy
lacks: a few messages, so the bytes written stay flat with the session's length; a
session with no copy (new, or expired) gets one whole, once. Sessions shorter than
``min_messages`` get none (their rows cost little to read), unless compacted. Every
failure to reach Redis is logged and ignored: the step goes on from PostgreSQL.
"""

from __future__ import annotations

import array
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness import Message, StoredMessages
from harness.model.transcript import encoded_after
from memory_store import TranscriptMark

if TYPE_CHECKING:
    import redis.asyncio as aioredis

log = logging.getLogger(__name__)

_REFERENCE = b'"tool_reference"'

UNKNOWN_EPOCH = -1
"""A copy's mark has no claim epoch: ``SessionStore.claim`` then reads the rows after it."""

TTL_S = 3600
"""A copy is dropped this long after it was last added to (a later step re-reads the
session from PostgreSQL and makes it anew)."""

MIN_MESSAGES = 64
"""Shorter transcripts get no copy: their rows are few to read."""

# KEYS: the copy's meta (hash: g, n, r), its joined text, its lengths (uint32 LE each).
# ARGV: generation, base (messages the copy must hold already; 0: the whole copy), length
# after, the text to add, the lengths to add, ttl in seconds, 1 when the text to add holds
# a tool_reference (r: whether the copy's does) else 0.
# Returns {1} when added, else {0, g, n} of the copy there ({0} when there is none).
_PUT = """
local g = redis.call('HGET', KEYS[1], 'g')
local n = redis.call('HGET', KEYS[1], 'n')
local gen, base = tonumber(ARGV[1]), tonumber(ARGV[2])
if base == 0 then
  if g and tonumber(g) >= gen then return {0, tonumber(g), tonumber(n)} end
  redis.call('SET', KEYS[2], ARGV[4])
  redis.call('SET', KEYS[3], ARGV[5])
  redis.call('HSET', KEYS[1], 'r', ARGV[7])
elseif g and tonumber(g) == gen and tonumber(n) == base then
  redis.call('APPEND', KEYS[2], ',' .. ARGV[4])
  redis.call('APPEND', KEYS[3], ARGV[5])
  if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'r', 1) end
elseif g then
  return {0, tonumber(g), tonumber(n)}
else
  return {0}
end
redis.call('HSET', KEYS[1], 'g', gen, 'n', tonumber(ARGV[3]))
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[6])) end
return {1}
"""

# KEYS as above. Returns {g, r, text, lengths}, or {} when there is no copy.
_GET = """
local meta = redis.call('HMGET', KEYS[1], 'g', 'r')
if not meta[1] then return {} end
return {meta[1], meta[2], redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3])}
"""


@dataclass(frozen=True)
class SharedCopy:
    """A session's copy: the first ``len(stored)`` messages of transcript ``generation``."""

    generation: int
    stored: StoredMessages

    @property
    def mark(self) -> TranscriptMark:
        """What to claim with (``SessionStore.claim``'s ``cached``)."""
        return TranscriptMark(UNKNOWN_EPOCH, self.generation, len(self.stored))


@dataclass
class SharedIO:
    """Payload bytes read from and written to the copies (for benches and tests)."""

    read_bytes: int = 0
    written_bytes: int = 0


class SharedTranscripts:
    """The copies of long transcripts in the deployment's Redis (see the module doc).

    Args:
        redis_url: the deployment's Redis (``REDIS_URL``).
        prefix: of every key (``<prefix>{<session id>}:meta`` …; the braces keep a
            session's keys in one cluster slot).
        ttl_s: a copy is dropped this long after it was last added to.
        min_messages: shorter transcripts get no copy.

    A Redis that does not answer within 2 s counts as unreachable (the step goes on).
    """

    def __init__(
        self,
        redis_url: str,
        *,
        prefix: str = "warroom:transcript:",
        ttl_s: int = TTL_S,
        min_messages: int = MIN_MESSAGES,
    ) -> None:
        import redis.asyncio as aioredis

        self._redis: aioredis.Redis = aioredis.from_url(
            redis_url, socket_timeout=2.0, socket_connect_timeout=2.0
        )
        self._prefix = prefix
        self._ttl_s = ttl_s
        self.min_messages = min_messages
        self._put = self._redis.register_script(_PUT)
        self._get = self._redis.register_script(_GET)
        self.io = SharedIO()

    async def read(self, session_id: str) -> SharedCopy | None:
        """The session's copy, or None (none kept, not whole, or Redis unreachable)."""
        from redis import RedisError

        try:
            found = await self._get(keys=self._keys(session_id))
        except RedisError as exc:
            log.warning("session %s: transcript copy not read (%s)", session_id, exc)
            return None
        if not found:
            return None
        generation, referenced, raw, packed = found
        if raw is None or packed is None:  # a key of the three was evicted
            return None
        self.io.read_bytes += len(raw) + len(packed)
        lengths = array.array("I")
        lengths.frombytes(packed)
        if sys.byteorder != "little":
            lengths.byteswap()
        try:
            # as ``share`` wrote it: each text its message's json_bytes, references flagged
            stored = StoredMessages.of_joined(
                raw, lengths, canonical=True, referenced=referenced != b"0"
            )
        except ValueError:
            log.warning("session %s: transcript copy inconsistent: ignored", session_id)
            return None
        return SharedCopy(int(generation), stored)

    async def share(
        self, session_id: str, generation: int, messages: Sequence[Message], known: int
    ) -> int:
        """Bring the copy up to ``messages`` (transcript ``generation`` as the store holds
        it after a commit); ``known``: how many of them the copy held when last seen
        (0: none, or not known). Returns how many it holds now, as far as this worker knows
        (``known`` when nothing could be added: Redis unreachable, or the copy is of a
        later transcript).

        A transcript shorter than ``min_messages`` gets no copy, unless it is a later
        generation (compacted: its copy replaces the longer one's, which cold steps would
        otherwise read and set aside until it expires).
        """
        from redis import RedisError

        if known >= len(messages):
            return known
        if len(messages) < self.min_messages and generation == 0:
            return known  # a short transcript, and no longer one's copy to replace
        base = known
        try:
            for _attempt in (1, 2):
                answer = await self._add(session_id, generation, messages, base)
                if answer[0] == 1:
                    return len(messages)
                if len(answer) == 1:  # no copy (expired, evicted, never made)
                    base = 0
                    continue
                there_generation, there = int(answer[1]), int(answer[2])
                if there_generation != generation or there > len(messages):
                    return known  # a later transcript's copy (this worker is behind)
                if there == len(messages):
                    return there
                base = there  # another worker added what it stored: add the rest
        except RedisError as exc:
            log.warning("session %s: transcript copy not updated (%s)", session_id, exc)
        return known

    async def aclose(self) -> None:
        """Close the Redis connection."""
        await self._redis.aclose()

    async def _add(
        self, session_id: str, generation: int, messages: Sequence[Message], base: int
    ) -> list[Any]:
        text, lengths = encoded_after(messages, base)
        packed = array.array("I", lengths)
        if sys.byteorder != "little":
            packed.byteswap()
        args: list[int | bytes] = [
            generation,
            base,
            len(messages),
            text,
            packed.tobytes(),
            self._ttl_s,
            int(_REFERENCE in text),
        ]
        self.io.written_bytes += len(text) + 4 * len(lengths)
        return list(await self._put(keys=self._keys(session_id), args=args))

    def _keys(self, session_id: str) -> list[str]:
        slot = f"{self._prefix}{{{session_id}}}"
        return [f"{slot}:meta", f"{slot}:text", f"{slot}:lens"]
