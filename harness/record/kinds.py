"""What a timeline entry records (``EntryKind``) and who acted (``Actor``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EntryKind(StrEnum):
    """What a timeline entry records."""

    MESSAGE = "message"  # a person wrote in a thread
    ANSWER = "answer"  # an agent's answer, as posted
    COMMAND = "command"  # a Bash command and how it ended
    EGRESS = "egress"  # a request through the egress gateway
    MCP = "mcp"  # an MCP tool call
    FILE = "file"  # a file written under /incident/ or /memory/
    NOTICE = "notice"  # something the session was told (sandbox replaced, a limit, …)
    APPROVAL = "approval"  # an approval asked for, or decided (who, when, what; §13)
    STOP = "stop"  # a person stopped the session (``stop``, the Stop button)


class ActorKind(StrEnum):
    """Who acted: a person, an agent session, or a subagent of one."""

    HUMAN = "human"
    AGENT = "agent"
    SUBAGENT = "subagent"


@dataclass(frozen=True)
class Actor:
    """``kind`` and ``id`` (a Slack user id, or a session id); ``label`` is what is shown."""

    kind: ActorKind
    id: str
    label: str
