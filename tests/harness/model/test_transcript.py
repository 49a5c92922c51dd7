"""A transcript read from the store: decoded where read, sent as stored, the same bytes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness import (
    Message,
    MessagesMemo,
    RedactedThinkingBlock,
    StoredMessages,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Transcript,
    appended,
    build_request,
)
from harness.model.transcript import containing, encoded_after, referenced_tools
from tests.harness.model.test_request import whole_body

SEARCH = ToolSpec("ToolSearch", "Find tools.", {"type": "object"})
PODS = ToolSpec("mcp__k8s__pods", "List pods.", {"type": "object"})
QUERY = ToolSpec("mcp__db__query", "Query.", {"type": "object"})


def varied(turns: int) -> tuple[Message, ...]:
    """A history with every kind of block: thinking and redacted thinking, text, tool
    calls with nested unsorted input, results that failed, results that reference a
    deferred tool, one sent whole and one gone, several results in one message, and
    non-ASCII text."""
    messages = [
        Message(
            "user",
            (TextBlock("<context>ctx</context>"), TextBlock("Le paiement échoue ✓ — 支付失败")),
        )
    ]
    for n in range(turns):
        first = ToolUseBlock(f"toolu_{n:04d}a", "Bash", {"z": [n, {"b": 1, "a": None}], "a": "é"})
        second = ToolUseBlock(f"toolu_{n:04d}b", "Read", {"file_path": "/incident/notes.md"})
        thinking = (
            ThinkingBlock(f"step {n} …", f"sig{n}")
            if n % 3
            else RedactedThinkingBlock(f"opaque{n}==")
        )
        messages.append(
            Message("assistant", (thinking, TextBlock(f"Checking {n}."), first, second))
        )
        refs: tuple[str, ...] = (PODS.name,) if n % 7 == 3 else (QUERY.name,) if n % 7 == 5 else ()
        refs += ("mcp__gone__tool",) if n % 11 == 9 else ()
        messages.append(
            Message(
                "user",
                (
                    ToolResultBlock(first.id, f'exit 1: "quoted" \\ {n}\n', n % 4 == 0, refs),
                    ToolResultBlock(second.id, "", False),
                    TextBlock("<system-reminder>r</system-reminder>"),
                ),
            )
        )
    return tuple(messages)


def request(messages: object, tools: tuple[ToolSpec, ...], memo: MessagesMemo | None) -> bytes:
    return build_request(
        model="claude-sonnet-5-5",
        max_tokens=100,
        system="You help.",
        tools=tools,
        messages=messages,  # type: ignore[arg-type]
        memo=memo,
    )


TOOL_SETS = [
    (),  # every reference is to a tool no longer offered
    (SEARCH, replace(PODS, defer_loading=True), replace(QUERY, defer_loading=True)),
    (SEARCH, replace(PODS, defer_loading=True), QUERY),  # one referenced tool sent whole
]


@pytest.mark.parametrize("shape", ["texts", "joined"])
@pytest.mark.parametrize("tools", TOOL_SETS, ids=["no-tools", "all-deferred", "one-whole"])
@pytest.mark.parametrize("turns", [0, 1, 40])
def test_a_request_from_a_stored_transcript_is_the_fully_built_request_byte_for_byte(
    shape: str, tools: tuple[ToolSpec, ...], turns: int
) -> None:
    # Given a varied history as the store keeps it, read back lazily (in either shape)
    history = varied(turns)
    texts = [m.to_json() for m in history]
    if shape == "texts":
        stored = StoredMessages.of_texts(texts)
    else:
        raw = ",".join(texts).encode()
        stored = StoredMessages.of_joined(raw, [len(t.encode()) for t in texts])
    new = Message("user", (TextBlock("and the pool?"),))
    lazy = appended(Transcript(stored), new)
    # When a model step's request is built from it (with and without the adapter's memo)
    # Then it is the request the decoded messages make, and the whole body's canonical
    # serialisation: the same bytes, the same cache breakpoints
    full = (*(Message.from_json(t) for t in texts), new)
    expected = request(full, tools, None)
    assert request(lazy, tools, None) == expected
    assert request(lazy, tools, MessagesMemo()) == expected
    whole = whole_body(system="You help.", tools=tools, messages=full)
    assert expected == json.dumps(whole, ensure_ascii=False, separators=(",", ":")).encode()
    assert expected.count(b'"cache_control"') == 3  # system, first and last message
    # And of the stored messages only the first (it carries a breakpoint) and those with
    # a reference (to see whether it is rewritten for these tools) were decoded
    assert isinstance(lazy, Transcript)
    referencing = {i for i, m in enumerate(history) if m.referenced_tools}
    assert lazy.decoded() == len(referencing | {0})


def test_a_warm_sessions_requests_from_a_stored_transcript_match_with_a_memo() -> None:
    # Given a transcript read from the store, then grown step by step in memory
    history = varied(40)
    messages = Transcript(StoredMessages.of_texts([m.to_json() for m in history]))
    plain: tuple[Message, ...] = history
    memo, tools = MessagesMemo(), TOOL_SETS[2]
    for n in range(40):
        added = (
            Message("user", (TextBlock(f"more {n}"),)),
            Message("assistant", (ToolUseBlock(f"toolu_w{n}", "Bash", {"command": "true"}),)),
        )
        messages = appended(messages, *added)  # type: ignore[assignment]
        plain = (*plain, *added)
        # Then every request is the one the plain messages make
        assert request(messages, tools, memo) == request(plain, tools, None)
    assert isinstance(messages, Transcript)


def test_a_stored_text_not_in_the_stored_shape_is_rendered_as_its_message() -> None:
    # Given a stored run with one text another writer wrote (spaces, another key order)
    history = list(varied(3))
    texts = [m.to_json() for m in history]
    texts[2] = json.dumps({"content": history[2].to_dict()["content"], "role": "user"})
    lazy = appended(Transcript(StoredMessages.of_texts(texts)), Message("user", (TextBlock("x"),)))
    plain = [*map(Message.from_stored, texts), Message("user", (TextBlock("x"),))]
    # Then the request is the one its messages make (that text decoded and re-rendered)
    assert request(lazy, (), None) == request(plain, (), None)
    assert texts[2].encode() not in request(lazy, (), None)


def test_a_transcript_is_a_sequence_of_its_messages_decoded_when_read() -> None:
    history = varied(5)
    stored = StoredMessages.of_texts([m.to_json() for m in history])
    t = Transcript(stored)
    extra = Message("assistant", (TextBlock("done"),))
    longer = appended(t, extra)
    assert isinstance(longer, Transcript)
    # Reading one message decodes that one, the same object every time
    assert t.decoded() == 0
    assert t[-1] == history[-1]
    assert t[-1] is t[len(t) - 1]
    assert t.decoded() == 1
    # It equals a tuple of the same messages (both ways), and a longer one starts with it
    assert t == history
    assert history == t
    assert longer == (*history, extra)
    assert longer != history
    assert t != (*history[:-1], extra)
    assert longer.starts_with(t)
    assert longer.starts_with(history)
    assert not t.starts_with(longer)
    assert not longer.starts_with((extra,))
    # Slices: a prefix is a transcript, a slice of the added messages a tuple
    assert isinstance(longer[:3], Transcript)
    assert longer[:3] == history[:3]
    assert longer[len(history) :] == (extra,)
    assert longer[2:4] == history[2:4]
    assert longer[::-2] == (*history, extra)[::-2]
    assert list(reversed(longer)) == [extra, *reversed(history)]
    assert longer[-1] is extra
    with pytest.raises(IndexError):
        longer[len(longer)]
    with pytest.raises(ValueError, match="outside"):
        Transcript(stored, len(stored) + 1)


def test_what_is_asked_of_a_whole_transcript_decodes_only_the_messages_that_answer() -> None:
    history = varied(12)
    lazy = Transcript(StoredMessages.of_texts([m.to_json() for m in history]))
    extra = Message("assistant", (TextBlock("done"),))
    longer = appended(lazy, extra)
    referencing = [m for m in history if m.referenced_tools]
    # The tools its results reference: only the messages with a reference are decoded
    assert (
        referenced_tools(longer)
        == referenced_tools(history)
        == {PODS.name, QUERY.name, "mcp__gone__tool"}
    )
    assert lazy.decoded() == len(referencing)
    # The messages that may name something: those whose text holds it, then the added ones
    named = list(containing(longer, "mcp__k8s__pods"))
    assert named == [m for m in history if PODS.name in m.referenced_tools] + [extra]
    assert lazy.decoded() == len(referencing)
    assert list(containing(longer, "nowhere")) == [extra]


def test_stored_messages_give_back_their_texts_in_either_shape() -> None:
    history = varied(4)
    texts = [m.to_json() for m in history]
    stored = StoredMessages.of_texts(texts)
    raw, lengths = stored.encoded(0, len(stored))
    joined = StoredMessages.of_joined(raw, lengths)
    assert [joined.text(i) for i in range(len(joined))] == texts
    assert joined.encoded(2, 5) == stored.encoded(2, 5)
    assert joined.joined(1, 4) == stored.joined(1, 4) == ",".join(texts[1:4]).encode()
    extra = Message("user", (TextBlock("é"),))
    assert encoded_after(appended(Transcript(joined), extra), 3) == (
        b",".join(m.json_bytes for m in (*history[3:], extra)),
        [len(m.json_bytes) for m in (*history[3:], extra)],
    )
    with pytest.raises(ValueError, match="do not hold"):
        StoredMessages.of_joined(raw + b"x", lengths)


def test_a_copy_is_made_of_json_bytes_even_from_texts_not_in_the_stored_shape() -> None:
    # Given a stored run with one text another writer wrote (another key order)
    history = varied(2)
    texts = [m.to_json() for m in history]
    texts[1] = json.dumps({"content": history[1].to_dict()["content"], "role": "assistant"})
    lazy = Transcript(StoredMessages.of_texts(texts))
    # Then what a copy is made of is each message's json_bytes (the canonical JSON)
    raw, lengths = encoded_after(lazy, 0)
    assert raw == b",".join(m.json_bytes for m in history)
    copy = Transcript(StoredMessages.of_joined(raw, lengths, canonical=True))
    assert copy == history
