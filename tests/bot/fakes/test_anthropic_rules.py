"""The fake Messages API refuses what the real API refuses, with the real error shape.

Every request goes through the real ``anthropic`` client, so the error is parsed the
way the harness will see it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI, Reply, ToolCall
from bot.fakes.anthropic_rules import sign

MODEL = "claude-sonnet-5-5"
ASK = {"role": "user", "content": [{"type": "text", "text": "Why is checkout failing?"}]}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}
TOOL = {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def body(**changes: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 1024, "messages": [ASK], **changes}


TEXT = {"type": "text", "text": "then check the DB"}
SIGNED = {"type": "thinking", "thinking": "", "signature": sign(MODEL, "")}
DEFERRED = {**TOOL, "name": "mcp__k8s__pods", "defer_loading": True}
SEARCH = {"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {"query": "pods"}}
REFERENCE = {"type": "tool_reference", "tool_name": "mcp__k8s__pods"}
LOADED = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [REFERENCE]}

REFUSED: list[tuple[str, dict[str, Any], int, str, str]] = [
    ("an unknown model", body(model="claude-nonesuch-9"), 404, "not_found_error",
     "model: claude-nonesuch-9"),
    ("a retired model", body(model="claude-sonnet-4-5"), 404, "not_found_error",
     "model: claude-sonnet-4-5"),
    ("a tool_use with no tool_result next", body(messages=[ASK, assistant(CALL), user(TEXT)]),
     400, "invalid_request_error",
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
     "toolu_1"),
    ("text before the tool_result", body(messages=[ASK, assistant(CALL), user(TEXT, RESULT)]),
     400, "invalid_request_error",
     "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message"),
    ("a tool_result with no matching tool_use", body(messages=[user(RESULT)]), 400,
     "invalid_request_error", "messages.0.content.0: unexpected `tool_use_id` found"),
    ("an empty text block", body(messages=[user({"type": "text", "text": ""})]), 400,
     "invalid_request_error", "messages: text content blocks must be non-empty"),
    ("a blank text block", body(messages=[user({"type": "text", "text": " \n"})]), 400,
     "invalid_request_error", "text content blocks must contain non-whitespace text"),
    ("thinking disabled on Sonnet 5.5", body(thinking={"type": "disabled"}), 400,
     "invalid_request_error",
     '"thinking.type.disabled" is not supported for this model. Use '
     '"thinking.type.between_tools"'),
    ("thinking disabled on Opus 5.5",
     body(model="claude-opus-5-5", thinking={"type": "disabled"}), 400, "invalid_request_error",
     '"thinking.type.disabled" is not supported for this model. Use "thinking.type.adaptive"'),
    ("a thinking budget on Sonnet 5.5",
     body(thinking={"type": "enabled", "budget_tokens": 2048}), 400, "invalid_request_error",
     '"thinking.type.enabled" is not supported for this model.'),
    ("temperature on Sonnet 5.5", body(temperature=0.2), 400, "invalid_request_error",
     "`temperature` is deprecated for this model."),
    ("an assistant prefill on Sonnet 5.5",
     body(messages=[ASK, assistant({"type": "text", "text": "The answer is"})]), 400,
     "invalid_request_error", "Prefilling assistant messages is not supported for this model."),
    ("an unknown top-level field", body(reasoning={"effort": "high"}), 400,
     "invalid_request_error", "reasoning: Extra inputs are not permitted"),
    ("an absurd max_tokens", body(max_tokens=10_000_000), 400, "invalid_request_error",
     "max_tokens: 10000000 > 128000, which is the maximum allowed number of output tokens for "
     "claude-sonnet-5-5"),
    ("a tool name with a space", body(tools=[{**TOOL, "name": "run bash"}]), 400,
     "invalid_request_error",
     "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"),
    ("an edited thinking block",
     body(messages=[ASK, assistant({**SIGNED, "thinking": "edited"}, CALL), user(RESULT)]),
     400, "invalid_request_error", "messages.1.content.0: Invalid `signature` in `thinking` block"),
    ("a thinking block of another model",
     body(model="claude-opus-5-5", messages=[ASK, assistant(SIGNED, CALL), user(RESULT)]),
     400, "invalid_request_error", "Invalid `signature` in `thinking` block"),
    ("five cache breakpoints",
     body(messages=[user(*[{"type": "text", "text": f"{i}", "cache_control": {"type": "ephemeral"}}
                           for i in range(5)])]),
     400, "invalid_request_error", "A maximum of 4 blocks with cache_control may be provided."),
    ("between_tools at max effort",
     body(thinking={"type": "between_tools"}, output_config={"effort": "max"}), 400,
     "invalid_request_error", '"thinking.type.between_tools" is not supported at effort max'),
    ("every tool deferred", body(tools=[DEFERRED]), 400, "invalid_request_error",
     "All tools have defer_loading set. At least one tool must be non-deferred."),
    ("a tool_reference to a tool the request does not define",
     body(tools=[TOOL], messages=[ASK, assistant(SEARCH), user(LOADED)]), 400,
     "invalid_request_error",
     "Tool reference 'mcp__k8s__pods' has no corresponding tool definition"),
    ("a tool_reference outside a tool result",
     body(tools=[TOOL, DEFERRED], messages=[user(REFERENCE)]), 400, "invalid_request_error",
     "messages.0.content.0: Input tag 'tool_reference' found using 'type' does not match"),
]  # fmt: skip


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI(lambda _: Reply.text("ok")) as server:
        yield server


@pytest.fixture
async def client(fake: FakeAnthropicAPI) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(
        api_key="sk-test", base_url=fake.base_url, max_retries=0
    ) as made:
        yield made


def _url(fake: FakeAnthropicAPI) -> str:
    return fake.base_url


async def send(client: anthropic.AsyncAnthropic, request: dict[str, Any]) -> Any:
    """POST the raw body through the real client (unknown fields and all)."""
    return await client.post("/v1/messages", cast_to=anthropic.types.Message, body=request)


@pytest.mark.parametrize(
    ("request_body", "status", "error_type", "message"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
async def test_the_fake_refuses_what_the_api_refuses(
    client: anthropic.AsyncAnthropic,
    request_body: dict[str, Any],
    status: int,
    error_type: str,
    message: str,
) -> None:
    with pytest.raises(anthropic.APIStatusError) as raised:
        await send(client, request_body)

    error = raised.value
    assert error.status_code == status
    assert isinstance(error.body, dict)
    assert error.body["type"] == "error"
    assert error.body["error"]["type"] == error_type
    assert message in error.body["error"]["message"]
    assert error.body["request_id"] == error.request_id
    assert error.request_id is not None
    assert error.request_id.startswith("req_")


ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("a tool loop with its results first",
     body(messages=[ASK, assistant(CALL), user(RESULT, TEXT)])),
    ("between_tools on Sonnet 5.5", body(thinking={"type": "between_tools"})),
    ("adaptive thinking with a summary",
     body(thinking={"type": "adaptive", "display": "summarized"})),
    ("temperature on Sonnet 4.6", body(model="claude-sonnet-4-6", temperature=0.2)),
    ("a prefill on Haiku 4.5",
     body(model="claude-haiku-4-5", messages=[ASK, assistant({"type": "text", "text": "So"})])),
    ("a thinking block sent back unchanged",
     body(messages=[ASK, assistant(SIGNED, CALL), user(RESULT)])),
    ("a deferred tool loaded by a tool_reference",
     body(tools=[TOOL, DEFERRED], messages=[ASK, assistant(SEARCH), user(LOADED)])),
]  # fmt: skip


@pytest.mark.parametrize("request_body", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
async def test_the_fake_accepts_what_the_api_accepts(
    client: anthropic.AsyncAnthropic, request_body: dict[str, Any]
) -> None:
    reply = await send(client, request_body)

    assert reply.stop_reason == "end_turn"


async def test_the_latest_thinking_of_a_tool_loop_must_come_back_as_it_was(
    client: anthropic.AsyncAnthropic, fake: FakeAnthropicAPI
) -> None:
    # Given a reply that thought, then called a tool
    fake_reply = Reply((ToolCall("Bash", {"command": "ls"}, id="toolu_7"),))
    scripted = FakeAnthropicAPI([fake_reply, Reply.text("done")])
    async with scripted, anthropic.AsyncAnthropic(api_key="k", base_url=_url(scripted)) as own:
        first = await send(own, body(tools=[TOOL]))
        thinking = first.content[0].model_dump()
        result = {**RESULT, "tool_use_id": "toolu_7"}
        call = first.content[1].model_dump()
        # When the loop goes on without the thinking block
        with pytest.raises(anthropic.BadRequestError) as raised:
            await send(own, body(tools=[TOOL], messages=[ASK, assistant(call), user(result)]))
        # Then it is refused; with the block unchanged it is accepted
        again = await send(
            own, body(tools=[TOOL], messages=[ASK, assistant(thinking, call), user(result)])
        )

    assert thinking["type"] == "thinking"
    assert thinking["signature"]
    assert "cannot be modified" in str(raised.value)
    assert again.stop_reason == "end_turn"
