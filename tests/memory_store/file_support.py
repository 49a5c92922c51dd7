"""Helpers for the file store tests."""

from __future__ import annotations

from memory_store import Origin


def who(tool_use_id: str | None = None, *, actor: str = "agent", session: str = "S1") -> Origin:
    """An ``Origin``: the agent in session S1 unless told otherwise."""
    return Origin(actor=actor, session_id=session, tool_use_id=tool_use_id)
