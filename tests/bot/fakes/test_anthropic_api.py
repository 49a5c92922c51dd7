"""The fake Messages API emits what the real API emits: thinking with signatures, every
stop reason, full usage, request ids, token counts, model info and honest cache figures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import pytest
from anthropic.lib.streaming import AsyncMessageStream

from bot.fakes.anthropic_api import FakeAnthropicAPI, Redacted, Reply, Thinking, ToolCall
from bot.fakes.anthropic_cache import LOOKBACK_BLOCKS, PromptCache, prompt_tokens

MODEL = "claude-sonnet-5-5"
ASK = [{"role": "user", "content": [{"type": "text", "text": "Why is checkout failing?"}]}]
SUMMARIZED = {"type": "adaptive", "display": "summarized"}


@pytest.fixture
async def client() -> AsyncIterator[tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic]]:
    async with (
        FakeAnthropicAPI() as fake,
        anthropic.AsyncAnthropic(api_key="k", base_url=fake.base_url, max_retries=0) as sdk,
    ):
        yield fake, sdk


async def stream(sdk: anthropic.AsyncAnthropic, **request: Any) -> anthropic.types.Message:
    body = {"model": MODEL, "max_tokens": 4096, "messages": ASK, "stream": True, **request}
    raw = await sdk.post(
        "/v1/messages",
        cast_to=anthropic.types.Message,
        body=body,
        stream=True,
        stream_cls=anthropic.AsyncStream[anthropic.types.RawMessageStreamEvent],
    )
    async with AsyncMessageStream(raw, output_format=anthropic.NOT_GIVEN) as s:
        async for _ in s:
            pass
        return s.current_message_snapshot


async def test_a_summarized_thinking_block_streams_its_text_then_its_signature(
    client: tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic],
) -> None:
    fake, _ = client
    fake.push(Reply((Thinking("The 500s began with the 14:01 deploy."), "Roll it back.")))
    request = {"model": MODEL, "max_tokens": 4096, "messages": ASK, "stream": True,
               "thinking": SUMMARIZED}  # fmt: skip

    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{fake.base_url}/v1/messages", json=request, headers={"x-api-key": "k"}
        )

    events = [json.loads(line[6:]) for line in response.text.splitlines() if line[:6] == "data: "]
    deltas = [e["delta"]["type"] for e in events if e["type"] == "content_block_delta"]
    assert deltas.index("signature_delta") > deltas.index("thinking_delta")
    assert deltas.index("signature_delta") < deltas.index("text_delta")
    assert response.headers["request-id"].startswith("req_")
    final = next(e for e in events if e["type"] == "message_delta")["usage"]
    assert set(final) >= {
        "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"
    }  # fmt: skip


async def test_thinking_text_is_omitted_unless_a_summary_is_asked_for(
    client: tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic],
) -> None:
    fake, sdk = client
    fake.push(Reply.text("hi"), Reply.text("hi"))

    default = await stream(sdk)
    summarized = await stream(sdk, thinking=SUMMARIZED)

    assert default.content[0].type == "thinking"
    assert default.content[0].thinking == ""
    assert summarized.content[0].type == "thinking"
    assert summarized.content[0].thinking
    assert default.content[0].signature
    assert summarized.content[0].signature


async def test_text_before_a_tool_call_comes_back_as_thinking_on_sonnet_5_5(
    client: tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic],
) -> None:
    fake, sdk = client
    fake.push(Reply.tool("Bash", {"command": "kubectl get pods"}, text="Checking the pods."))

    reply = await stream(sdk, thinking=SUMMARIZED, tools=[TOOL])

    assert [b.type for b in reply.content] == ["thinking", "tool_use"]
    assert reply.content[0].thinking == "Checking the pods."  # type: ignore[union-attr]


TOOL = {"name": "Write", "description": "Write a file.", "input_schema": {"type": "object"}}


async def test_a_tool_call_cut_by_max_tokens_arrives_with_partial_input(
    client: tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic],
) -> None:
    fake, sdk = client
    call = ToolCall("Write", {"file_path": "/incident/notes.md", "content": "long text"})
    fake.push(Reply((call,), "max_tokens"))

    reply = await stream(sdk, tools=[TOOL])

    assert reply.stop_reason == "max_tokens"
    last = reply.content[-1]
    assert last.type == "tool_use"
    assert last.input == {"file_path": "/incident/notes.md"}


async def test_a_refusal_carries_stop_details(
    client: tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic],
) -> None:
    fake, sdk = client
    fake.push(Reply.refused(category="cyber", explanation="This looks like exploit work."))

    reply = await stream(sdk)

    assert reply.stop_reason == "refusal"
    assert reply.stop_details is not None
    assert (reply.stop_details.category, reply.stop_details.explanation) == (
        "cyber", "This looks like exploit work."
    )  # fmt: skip


async def test_redacted_thinking_comes_back_opaque_and_is_accepted_when_sent_back(
    client: tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic],
) -> None:
    fake, sdk = client
    fake.push(
        Reply((Redacted(), ToolCall("Write", {"file_path": "/x"}, id="toolu_r"))), Reply.text("ok")
    )

    first = await stream(sdk, tools=[TOOL])
    blocks = [b.model_dump(exclude_none=True) for b in first.content]
    result = {"type": "tool_result", "tool_use_id": "toolu_r", "content": "written"}
    second = await stream(
        sdk, tools=[TOOL], messages=[*ASK, {"role": "assistant", "content": blocks},
                                     {"role": "user", "content": [result]}]
    )  # fmt: skip

    assert first.content[0].type == "redacted_thinking"
    assert first.content[0].data
    assert second.stop_reason == "end_turn"


@pytest.mark.parametrize("stop_reason", ["pause_turn", "stop_sequence", "end_turn"])
async def test_every_scripted_stop_reason_is_reported(
    client: tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic], stop_reason: str
) -> None:
    fake, sdk = client
    fake.push(Reply(("partial",), stop_reason))

    reply = await stream(sdk)

    assert reply.stop_reason == stop_reason


async def test_a_prompt_over_the_context_window_is_refused_as_too_long() -> None:
    async with FakeAnthropicAPI([Reply.text("x")], context_tokens=100) as fake:  # noqa: SIM117
        async with anthropic.AsyncAnthropic(
            api_key="k", base_url=fake.base_url, max_retries=0
        ) as sdk:
            big = [{"role": "user", "content": [{"type": "text", "text": "log line " * 200}]}]
            with pytest.raises(anthropic.BadRequestError) as raised:
                await stream(sdk, messages=big)

    assert "prompt is too long" in str(raised.value)


async def test_count_tokens_and_model_info_answer_like_the_api(
    client: tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic],
) -> None:
    _, sdk = client

    counted = await sdk.messages.count_tokens(model=MODEL, messages=ASK)  # type: ignore[arg-type]
    current = await sdk.models.retrieve(MODEL)
    retired = await sdk.models.retrieve("claude-sonnet-4-5")
    with pytest.raises(anthropic.NotFoundError):
        await sdk.models.retrieve("claude-nonesuch-9")

    assert counted.input_tokens > 0
    assert (current.lifecycle, current.max_tokens) == ("active", 128_000)
    assert retired.lifecycle == "retired"
    assert retired.retires_at is not None


def cached_body(blocks: int, *, text: str = "x" * 400) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": f"{i} {text}"} for i in range(blocks)]
    content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
    return {"model": MODEL, "messages": [{"role": "user", "content": content}]}


def test_the_cache_looks_back_about_twenty_blocks_from_a_breakpoint() -> None:
    cache = PromptCache()
    cache.account(cached_body(10), min_tokens=512)

    near = cache.account(cached_body(10 + LOOKBACK_BLOCKS), min_tokens=512)
    far_cache = PromptCache()
    far_cache.account(cached_body(10), min_tokens=512)
    far = far_cache.account(cached_body(10 + LOOKBACK_BLOCKS + 2), min_tokens=512)

    assert near.cache_read_input_tokens > 0
    assert far.cache_read_input_tokens == 0


def test_a_prefix_under_the_minimum_cacheable_length_is_not_cached() -> None:
    cache = PromptCache()
    first = cache.account(cached_body(1, text="short"), min_tokens=512)
    again = cache.account(cached_body(1, text="short"), min_tokens=512)

    assert first.cache_creation_input_tokens == 0
    assert again.cache_read_input_tokens == 0


def test_a_deferred_tool_counts_in_the_prompt_only_once_a_reference_loads_it() -> None:
    big = {"name": "mcp__k8s__pods", "description": "x" * 4000, "input_schema": {}}
    search = {"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {}}
    loaded = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "tool_reference", "tool_name": big["name"]}],
    }
    turn = [*ASK, {"role": "assistant", "content": [search]}, {"role": "user", "content": [loaded]}]
    whole = prompt_tokens({"tools": [big], "messages": ASK})
    deferred = prompt_tokens({"tools": [{**big, "defer_loading": True}], "messages": ASK})
    after = prompt_tokens({"tools": [{**big, "defer_loading": True}], "messages": turn})
    assert deferred < 100 < 1000 < whole <= after


def test_a_json_script_can_hold_thinking_a_cut_call_and_a_refusal() -> None:
    from bot.fakes.anthropic_script import script_from_json

    replies = script_from_json(
        '[{"content": [{"thinking": "Check pods."}, {"tool": "Bash", "input": {"command": "ls"}}],'
        ' "stop_reason": "max_tokens"},'
        ' {"refusal": {"category": "cyber", "explanation": "No."}, "text": "Sure"}]'
    )

    first, second = replies
    assert isinstance(first, Reply)
    assert first.content[0] == Thinking("Check pods.")
    assert first.resolved_stop_reason() == "max_tokens"
    assert isinstance(second, Reply)
    assert second.resolved_stop_reason() == "refusal"
    assert second.refusal == ("cyber", "No.")


async def test_a_reference_to_an_undefined_tool_is_the_sdks_unresolved_reference_error(
    client: tuple[FakeAnthropicAPI, anthropic.AsyncAnthropic],
) -> None:
    # Given a tool result referencing a tool the request does not define
    _, sdk = client
    search = {"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {}}
    loaded = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "tool_reference", "tool_name": "mcp__k8s__pods"}],
    }
    turn = [*ASK, {"role": "assistant", "content": [search]}, {"role": "user", "content": [loaded]}]
    tool = {"name": "ToolSearch", "description": "Find tools.", "input_schema": {"type": "object"}}
    # When it is sent, Then the SDK raises the typed error the real API's code maps to
    request: dict[str, Any] = {"messages": turn, "tools": [tool]}
    with pytest.raises(anthropic.BadRequestError) as refused:
        await sdk.messages.create(model=MODEL, max_tokens=1024, **request)
    assert refused.value.error_code == "tool_reference_unresolved"
    assert type(refused.value).__name__ == "ToolReferenceUnresolvedError"
