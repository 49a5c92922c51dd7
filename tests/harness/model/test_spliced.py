"""A session's request joins only the messages added since its last request."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import (
    InvalidMessage,
    Message,
    MessagesMemo,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    build_request,
)

PODS = ToolSpec("mcp__k8s__pods", "List pods.", {"type": "object"})


def history(n: int) -> list[Message]:
    messages = [Message("user", (TextBlock("checkout 500s"),))]
    for i in range(n):
        call = ToolUseBlock(f"toolu_{i:05d}", "Bash", {"command": f"echo {i}"})
        messages.append(Message("assistant", (call,)))
        refs = (PODS.name,) if i % 9 == 4 else ()
        messages.append(Message("user", (ToolResultBlock(call.id, f"{i}", False, refs),)))
    return messages


class Counting:
    def __init__(self) -> None:
        self.rendered = 0

    def __call__(self, message: Message) -> bytes:
        self.rendered += 1
        return message.json_bytes


def test_a_longer_history_of_the_same_messages_renders_only_the_new_ones() -> None:
    memo, render = MessagesMemo(), Counting()
    messages = history(40)

    first = memo.join(messages, "tools", render)
    second = memo.join([*messages, *history(2)[1:]], "tools", render)

    assert render.rendered == len(messages) + 4
    assert first == b",".join(m.json_bytes for m in messages)
    assert second == first + b"," + b",".join(m.json_bytes for m in history(2)[1:])


def test_other_tools_another_history_or_a_rewritten_message_render_afresh() -> None:
    memo, render = MessagesMemo(), Counting()
    messages = history(40)
    memo.join(messages, "tools", render)

    memo.join(messages, "other tools", render)  # what render depends on changed
    rewritten = [messages[0], Message("assistant", (TextBlock("compacted"),)), *messages[2:]]
    memo.join(rewritten, "other tools", render)  # same first message, another second
    memo.join(history(40), "other tools", render)  # equal messages, other objects

    assert render.rendered == 4 * len(messages)


def body(
    messages: list[Message], tools: tuple[ToolSpec, ...], memo: MessagesMemo | None = None
) -> bytes:
    return build_request(
        model="claude-sonnet-5-5",
        max_tokens=100,
        system="S",
        tools=tools,
        messages=messages,
        memo=memo,
    )


def test_requests_of_a_growing_session_are_the_same_bytes_with_a_memo_and_without() -> None:
    memo = MessagesMemo()
    messages = history(60)
    for tools in [(PODS,), (replace(PODS, defer_loading=True),), (PODS,)]:
        for end in range(70, len(messages) + 1, 7):
            assert body(messages[:end], tools, memo) == body(messages[:end], tools)
    # and after a compaction rewrote the history
    compacted = [Message("user", (TextBlock("summary"),)), *messages[50:]]
    assert body(compacted, (PODS,), memo) == body(compacted, (PODS,))


def test_stored_messages_build_the_same_request_without_being_decoded() -> None:
    # Given a history as the store gives it back: each message's own JSON text
    messages = history(40)
    stored = [Message.from_stored(m.to_json()) for m in messages]
    tools = [PODS, ToolSpec("Bash", "Run.", {"type": "object"})]
    # When a request is built from them
    body = build_request(model="m", max_tokens=64, system="s", tools=tools, messages=stored)
    # Then it is the request the decoded messages make
    assert body == build_request(
        model="m", max_tokens=64, system="s", tools=tools, messages=messages
    )
    # And the messages sent as stored were not decoded: a corrupt middle message goes out
    # as it is stored (the store holds only what ``to_json`` wrote), its blocks unread
    corrupt = '{"role":"assistant","content":[{"type":"tool_use","id":7}]}'
    spliced = [stored[0], Message.from_stored(corrupt), stored[-1]]
    assert corrupt.encode() in build_request(
        model="m", max_tokens=64, system="", tools=(), messages=spliced
    )


def test_a_stored_message_reads_as_the_message_it_was() -> None:
    refs = Message("user", (ToolResultBlock("t1", "found", False, (PODS.name,)),))
    plain = Message(
        "assistant", (TextBlock("Looking."), ToolUseBlock("t2", "Bash", {"b": 1, "a": 2}))
    )
    for message in (refs, plain):
        stored = Message.from_stored(message.to_json())
        assert stored.role == message.role
        assert stored.referenced_tools == message.referenced_tools
        assert stored == message
        assert stored.content == message.content
        assert stored.to_json() == message.to_json()
        assert replace(stored, role="user").content == message.content


def test_a_stored_message_that_is_not_canonical_is_decoded_at_once() -> None:
    # Given texts not written by ``to_json`` (spaces, or another key first)
    loose = '{"role": "user", "content": [{"type": "text", "text": "hi"}]}'
    # Then they are decoded at once: a good one is the message, a bad one raises now
    assert Message.from_stored(loose) == Message("user", (TextBlock("hi"),))
    assert (
        Message.from_stored(loose).to_json()
        == '{"role":"user","content":[{"type":"text","text":"hi"}]}'
    )
    with pytest.raises(InvalidMessage):
        Message.from_stored('{"content": [], "role": "system"}')


def test_a_stored_message_whose_blocks_are_malformed_raises_when_they_are_read() -> None:
    stored = Message.from_stored('{"role":"user","content":[{"type":"image"}]}')
    assert stored.role == "user"
    with pytest.raises(InvalidMessage):
        _ = stored.content
