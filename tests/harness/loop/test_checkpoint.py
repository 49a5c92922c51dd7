"""The checkpoint's two serialisations (whole, and state without the transcript), and the
step state machine read from it (``next_call``, ``next_kind``)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import cast

import pytest

from harness import (
    Checkpoint,
    Collaborators,
    Inbound,
    Message,
    Requester,
    StepKind,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    advance,
    answer_posted,
    holds_messages,
    in_flight_tool,
    next_kind,
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


def test_pending_inputs_keep_their_kind_and_older_checkpoints_read_as_user_input() -> None:
    cp = Checkpoint(
        "s1",
        "T1",
        "C1",
        Requester("U1"),
        pending_input=(Inbound("U2", "hi", "Bob"), Inbound("", "woke", kind="wake")),
    )
    back = Checkpoint.from_json(cp.to_json())
    assert [(i.kind, i.from_user) for i in back.pending_input] == [("user", True), ("wake", False)]
    older = json.loads(cp.to_json())
    older["pending_input"] = [["U2", "hi", "Bob"]]  # as written before kinds existed
    assert Checkpoint.from_json(json.dumps(older)).pending_input == (Inbound("U2", "hi", "Bob"),)


def test_a_whole_checkpoint_keeps_its_own_messages() -> None:
    cp = Checkpoint("s1", "T1", "C1", Requester("U1"), messages=MESSAGES)
    assert holds_messages(cp.to_json())
    assert Checkpoint.from_json(cp.to_json(), messages=()).messages == MESSAGES
    assert json.loads(cp.to_json())["v"] == 1


@pytest.mark.parametrize(
    "ids",
    [("s1", "T1", "C1", Requester("U1")), ('s"2', "E1", "C\\2", Requester("U2", "Zoë «ops»"))],
)
def test_a_new_sessions_json_is_the_checkpoints_own(ids: tuple[str, str, str, Requester]) -> None:
    made = Checkpoint.initial_json(*ids)
    assert made == Checkpoint(*ids).to_json()
    assert Checkpoint.from_json(made) == Checkpoint(*ids)


def test_the_next_call_is_the_first_tool_use_without_a_result_then_none() -> None:
    second = ToolUseBlock("toolu_2", "Read", {"file_path": "/memory/x.md"})
    cp = Checkpoint(
        "s1",
        "T1",
        "C1",
        Requester("U1"),
        messages=(MESSAGES[0], Message("assistant", (CALL, second))),
    )
    assert cp.next_call() == CALL
    answered = replace(cp, pending_results=(ToolResultBlock("toolu_1", "a.txt"),))
    assert answered.next_call() == second
    assert answered.unanswered_calls() == (second,)
    done = replace(
        answered, pending_results=(*answered.pending_results, ToolResultBlock("toolu_2", "x"))
    )
    assert done.next_call() is None
    asked = replace(cp, messages=(*cp.messages, Message("user", (TextBlock("and?"),))))
    assert asked.next_call() is None  # only the last message, and only the assistant's


def test_the_step_kinds_follow_the_protocol_order() -> None:
    # Given one checkpoint in each state, Then next_kind names the step that comes next
    base = Checkpoint("s1", "T1", "C1", Requester("U1"))
    assert next_kind(base) is StepKind.WAIT
    assert next_kind(base, (Inbound("U1", "look"),)) is StepKind.MODEL
    calling = replace(base, messages=MESSAGES)
    assert next_kind(calling) is StepKind.TOOL
    assert next_kind(replace(calling, in_flight="toolu_1")) is StepKind.RECOVER
    results = (ToolResultBlock("toolu_1", "a.txt"),)
    assert next_kind(replace(calling, pending_results=results)) is StepKind.MODEL
    ended = replace(base, messages=(MESSAGES[0], Message("assistant", (TextBlock("Done."),))))
    assert next_kind(ended) is StepKind.WAIT
    # an unposted answer comes first, even before a reply that arrived meanwhile
    answered = replace(ended, answer="Done.")
    assert next_kind(answered, (Inbound("U2", "thanks"),)) is StepKind.POST
    assert next_kind(answer_posted(answered), (Inbound("U2", "more?"),)) is StepKind.MODEL


async def test_advance_leaves_the_post_to_the_durable_layer() -> None:
    answered = Checkpoint("s1", "T1", "C1", Requester("U1"), messages=MESSAGES[:1], answer="Done.")
    with pytest.raises(ValueError, match="post it"):
        await advance(answered, cast(Collaborators, None))
