"""The checkpoint's two serialisations: whole (``to_json``) and state without the transcript."""

from __future__ import annotations

import json

from harness import (
    Checkpoint,
    Message,
    Requester,
    TextBlock,
    ToolUseBlock,
    holds_messages,
    in_flight_tool,
)

CALL = ToolUseBlock("toolu_1", "Bash", {"command": "ls"})
MESSAGES = (Message("user", (TextBlock("look"),)), Message("assistant", (CALL,)))


def test_the_state_leaves_the_transcript_out_and_takes_it_back() -> None:
    cp = Checkpoint("s1", "T1", "C1", Requester("U1"), messages=MESSAGES, in_flight="toolu_1")
    state = cp.state_json()
    assert "look" not in state
    assert not holds_messages(state)
    assert Checkpoint.from_json(state, messages=MESSAGES) == cp


def test_the_state_names_the_tool_in_flight_for_readers_without_the_transcript() -> None:
    cp = Checkpoint("s1", "T1", "C1", Requester("U1"), messages=MESSAGES, in_flight="toolu_1")
    assert in_flight_tool(cp.state_json()) == "Bash"
    assert in_flight_tool(cp.to_json()) == "Bash"
    idle = Checkpoint("s1", "T1", "C1", Requester("U1"), messages=MESSAGES)
    assert in_flight_tool(idle.state_json()) is None


def test_a_whole_checkpoint_keeps_its_own_messages() -> None:
    cp = Checkpoint("s1", "T1", "C1", Requester("U1"), messages=MESSAGES)
    assert holds_messages(cp.to_json())
    assert Checkpoint.from_json(cp.to_json(), messages=()).messages == MESSAGES
    assert json.loads(cp.to_json())["v"] == 1
