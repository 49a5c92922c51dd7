"""Limits of one session, as one value passed down from settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Per-session limits.

    Attributes:
        max_steps: model calls + tool calls before the session must answer.
        max_session_tokens: total model tokens (all kinds) before it must answer.
        max_tokens: ``max_tokens`` of one model call.
        compact_at_tokens: prompt size (input + cache tokens of the last call) that
            triggers compaction; Claude models take 200k tokens of context.
        loop_repeats: the same call with the same input this many times in a row earns a note.
        bash_max_timeout_ms: Claude Code's Bash maximum (600000).
    """

    max_steps: int = 200
    max_session_tokens: int = 5_000_000
    max_tokens: int = 8192
    compact_at_tokens: int = 150_000
    loop_repeats: int = 3
    bash_max_timeout_ms: int = 600_000
