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
