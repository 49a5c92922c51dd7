"""The request body asks each model family for thinking the way that family accepts it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness import (
    AnthropicModel,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    build_request,
)
from harness.model.request import thinking_options

ASK = (Message("user", (TextBlock("Why is checkout failing?"),)),)


def test_current_models_get_adaptive_thinking_with_summaries() -> None:
    assert thinking_options("claude-sonnet-5-5", 32_000, None) == {
        "thinking": {"type": "adaptive", "display": "summarized"}
    }


def test_models_without_adaptive_thinking_get_a_budget_under_max_tokens() -> None:
    options = thinking_options("claude-haiku-4-5", 32_000, None)

    assert options["thinking"]["type"] == "enabled"
    assert 1024 <= options["thinking"]["budget_tokens"] < 32_000


def test_an_effort_goes_into_output_config_and_one_the_model_refuses_fails_early() -> None:
    assert thinking_options("claude-opus-5-5", 32_000, "high")["output_config"] == {
        "effort": "high"
    }
    with pytest.raises(ValueError, match="does not accept effort"):
        AnthropicModel(api_key="k", model="claude-haiku-4-5", effort="max")


def test_no_breakpoint_lands_on_a_thinking_block() -> None:
    turn = Message("assistant", (TextBlock("Looking."), ThinkingBlock("", "sig")))
    body = json.loads(
        build_request(
            model="claude-sonnet-5-5", max_tokens=100, system="s", tools=(), messages=(*ASK, turn)
        )
    )

    last = body["messages"][-1]["content"]
    assert "cache_control" in last[0]
    assert "cache_control" not in last[1]


def test_thinking_blocks_round_trip_through_json_byte_for_byte() -> None:
    turn = Message("assistant", (ThinkingBlock("Pods first.", "c2lnbmVk+/="), TextBlock("ok")))

    assert Message.from_json(turn.to_json()) == turn
    assert Message.from_json(turn.to_json()).to_json() == turn.to_json()


LOADED = (
    *ASK,
    Message("assistant", (ToolUseBlock("toolu_1", "ToolSearch", {"query": "pods"}),)),
    Message("user", (ToolResultBlock("toolu_1", "", tool_references=("mcp__k8s__pods",)),)),
)
PODS = ToolSpec("mcp__k8s__pods", "List pods.", {"type": "object"})
SEARCH = ToolSpec("ToolSearch", "Load deferred tools.", {"type": "object"})


def loaded_content(*tools: ToolSpec) -> object:
    body = json.loads(
        build_request(
            model="claude-sonnet-5-5", max_tokens=100, system="", tools=tools, messages=LOADED
        )
    )
    return body["messages"][-1]["content"][0]["content"]


def test_a_deferred_tool_is_sent_with_defer_loading_and_never_carries_the_breakpoint() -> None:
    body = json.loads(
        build_request(
            model="claude-sonnet-5-5",
            max_tokens=100,
            system="",
            tools=(SEARCH, replace(PODS, defer_loading=True)),
            messages=ASK,
        )
    )

    search, pods = body["tools"]
    assert "defer_loading" not in search
    assert search["cache_control"] == {"type": "ephemeral"}
    assert pods["defer_loading"] is True
    assert "cache_control" not in pods


def test_a_reference_stays_a_reference_only_while_its_tool_is_deferred() -> None:
    reference = [{"type": "tool_reference", "tool_name": "mcp__k8s__pods"}]

    assert loaded_content(SEARCH, replace(PODS, defer_loading=True)) == reference
    assert loaded_content(SEARCH, PODS) == [
        {"type": "text", "text": "(The tool mcp__k8s__pods is in the tool list now.)"}
    ]
    assert loaded_content(SEARCH) == [
        {"type": "text", "text": "(The tool mcp__k8s__pods is no longer available.)"}
    ]


def whole_body(
    *, system: str, tools: tuple[ToolSpec, ...], messages: tuple[Message, ...]
) -> dict[str, object]:
    """The body as one JSON value built from scratch: what the spliced bytes must parse to."""
    deferred = {t.name for t in tools if t.defer_loading}
    wire = [m.to_dict() for m in messages]
    for message in wire:
        for block in message["content"]:
            if block["type"] == "tool_result" and isinstance(block["content"], list):
                block["content"] = [
                    item
                    if item["type"] != "tool_reference" or item["tool_name"] in deferred
                    else {
                        "type": "text",
                        "text": f"(The tool {item['tool_name']} "
                        + (
                            "is in the tool list now.)"
                            if any(t.name == item["tool_name"] for t in tools)
                            else "is no longer available.)"
                        ),
                    }
                    for item in block["content"]
                ]
    for message in (wire[:1] + wire[-1:]) if wire else []:
        markable = [b for b in message["content"] if b["type"] not in ("thinking",)]
        if markable:
            markable[-1]["cache_control"] = {"type": "ephemeral"}
    tool_defs = [t.to_dict() for t in tools]
    static: list[dict[str, object]] = [{"type": "text", "text": system}] if system else []
    marked: list[dict[str, object]] = static or [d for d in tool_defs if not d.get("defer_loading")]
    if marked:
        marked[-1]["cache_control"] = {"type": "ephemeral"}
    body: dict[str, object] = {"model": "claude-sonnet-5-5", "max_tokens": 100}
    body["thinking"] = {"type": "adaptive", "display": "summarized"}
    body["stream"] = True
    if tool_defs:
        body["tools"] = tool_defs
    if static:
        body["system"] = static
    body["messages"] = wire
    return body


def long_transcript() -> tuple[Message, ...]:
    """A session's history: thinking, tool calls with nested input, results with
    references to a deferred and to a no longer deferred tool, non-ASCII text."""
    messages = [Message("user", (TextBlock("Pourquoi le paiement échoue-t-il ? ✓"),))]
    for n in range(40):
        call = ToolUseBlock(f"toolu_{n:04d}", "Bash", {"z": [n, {"b": 1, "a": None}], "a": "é"})
        messages.append(
            Message("assistant", (ThinkingBlock(f"step {n}", f"sig{n}"), TextBlock("…"), call))
        )
        refs = ("mcp__k8s__pods",) if n % 7 == 3 else ("mcp__db__query",) if n % 7 == 5 else ()
        messages.append(Message("user", (ToolResultBlock(call.id, f"out {n}\n", False, refs),)))
    return tuple(messages)


@pytest.mark.parametrize("system", ["", "You help with incidents."])
@pytest.mark.parametrize("count", [0, 1, 2, 81])
def test_the_spliced_body_is_the_whole_body_byte_for_byte(system: str, count: int) -> None:
    # Given a history whose middle messages are sent as stored, and a tool list where one
    # referenced tool is deferred and another is sent whole
    tools = (SEARCH, replace(PODS, defer_loading=True), ToolSpec("mcp__db__query", "Q.", {}))
    messages = long_transcript()[:count]

    body = build_request(
        model="claude-sonnet-5-5", max_tokens=100, system=system, tools=tools, messages=messages
    )

    # Then the bytes are the canonical serialisation of the whole body
    expected = whole_body(system=system, tools=tools, messages=messages)
    assert body == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()
    # and a middle message with a reference to a tool sent whole was rewritten
    if count == 81:
        assert b"(The tool mcp__db__query is in the tool list now.)" in body
        assert b'"tool_name":"mcp__k8s__pods"' in body
