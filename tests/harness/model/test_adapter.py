"""The model adapter, driven through the real ``anthropic`` client against a local fake API."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import httpx
import pytest

from harness import (
    DEFAULT_MODEL,
    AnthropicModel,
    InvalidMessage,
    Message,
    ModelContextOverflow,
    ModelRejected,
    ModelReply,
    ModelStalled,
    ModelUnavailable,
    RefusalDetails,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
    build_request,
    from_wire,
    to_wire,
)
from tests.fakes.anthropic_api import FakeAnthropicAPI, Fault, Reply

EPHEMERAL = {"type": "ephemeral"}
MARK = b',"cache_control":{"type":"ephemeral"}'
TOOLS = (
    ToolSpec("Read", "Read a file.", {"type": "object", "properties": {"file_path": {}}}),
    ToolSpec("Bash", "Run a command.", {"type": "object", "properties": {"command": {}}}),
)
SYSTEM = "You are Warroom, an incident-response agent."
ASK = (Message("user", (TextBlock("checkout-api returns 500s since 14:02"),)),)

ModelFactory = Callable[..., AnthropicModel]


class Sleeps:
    """Stands in for asyncio.sleep: records each requested delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay_s: float) -> None:
        self.delays.append(delay_s)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    # The wire-format tests compare whole replies; thinking has its own tests.
    async with FakeAnthropicAPI(think=False) as server:
        yield server


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def make_model(fake: FakeAnthropicAPI, sleeps: Sleeps) -> AsyncIterator[ModelFactory]:
    made: list[AnthropicModel] = []

    def make(**overrides: Any) -> AnthropicModel:
        options: dict[str, Any] = {
            "api_key": "sk-test",
            "model": DEFAULT_MODEL,
            "base_url": fake.base_url,
            "max_attempts": 4,
            "sleep": sleeps,
        }
        model = AnthropicModel(**(options | overrides))
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


async def ask(model: AnthropicModel, messages: tuple[Message, ...] = ASK, **kw: Any) -> ModelReply:
    return await model.complete(system=SYSTEM, tools=TOOLS, messages=messages, **kw)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- replies ---------------------------------------------------------------------------


async def test_text_reply_comes_back_with_stop_reason_model_and_request_id(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    fake.push(Reply.text("The last deploy at 14:01 changed the DB pool size."))

    reply = await ask(make_model())

    assert reply.content == (TextBlock("The last deploy at 14:01 changed the DB pool size."),)
    assert reply.stop_reason == "end_turn"
    assert reply.model == DEFAULT_MODEL
    assert reply.request_id is not None
    assert reply.request_id.startswith("req_")
    assert reply.attempts == 1
    assert reply.to_message() == Message("assistant", reply.content)


async def test_on_text_sees_the_text_grow_chunk_by_chunk(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    text = "Looking at the pods first, then at the last deploy."
    fake.push(Reply.text(text))
    seen: list[str] = []

    async def on_text(so_far: str) -> None:
        seen.append(so_far)

    await ask(make_model(), on_text=on_text)

    assert len(seen) > 2
    assert seen[-1] == text
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(seen))


async def test_tool_use_input_is_assembled_from_partial_json_chunks(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    tool_input = {"command": "kubectl get pods -n checkout", "timeout": 60000, "nested": [1, {}]}
    fake.push(Reply.tool("Bash", tool_input, text="Checking the pods."))

    reply = await ask(make_model())

    assert reply.stop_reason == "tool_use"
    assert reply.content[0] == TextBlock("Checking the pods.")
    call = reply.content[1]
    assert isinstance(call, ToolUseBlock)
    assert (call.name, dict(call.input)) == ("Bash", tool_input)
    assert call.id.startswith("toolu_")


async def test_fake_streams_tool_input_as_several_partial_json_deltas(
    fake: FakeAnthropicAPI,
) -> None:
    # The adapter test above proves assembly only if the input really arrives in pieces.
    fake.push(Reply.tool("Read", {"file_path": "/incident/notes.md", "limit": 200}))
    request = {"model": DEFAULT_MODEL, "max_tokens": 10, "stream": True, "messages": to_wire(ASK)}

    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{fake.base_url}/v1/messages", json=request, headers={"x-api-key": "k"}
        )

    data = [json.loads(line[6:]) for line in response.text.splitlines() if line[:6] == "data: "]
    partials = [d["delta"]["partial_json"] for d in data if d["type"] == "content_block_delta"]
    assert len([p for p in partials if p]) >= 3
    assert json.loads("".join(partials)) == {"file_path": "/incident/notes.md", "limit": 200}
    assert (data[0]["type"], data[-1]["type"]) == ("message_start", "message_stop")


async def test_usage_records_input_output_and_cache_tokens(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    # Given a first call that writes the prompt to the cache (longer than the
    # model's minimum cacheable prompt, 512 tokens)
    fake.push(Reply.text("Pods are crash-looping."), Reply.text("Rolling back."))
    model = make_model()
    system = SYSTEM + " Check the runbooks first." * 200
    first = await model.complete(system=system, tools=TOOLS, messages=ASK)
    # When the next call appends to the same transcript
    later = (*ASK, first.to_message(), Message("user", (TextBlock("roll it back"),)))
    second = await model.complete(system=system, tools=TOOLS, messages=later)
    # Then the first wrote the cache, and the second read that prefix back
    assert first.usage.cache_creation_input_tokens > 0
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.output_tokens > 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens > 0
    assert second.usage.output_tokens > 0


def test_usage_adds_counter_by_counter() -> None:
    total = Usage(1, 2, 3, 4) + Usage(10, 20, 30, 40)

    assert total == Usage(11, 22, 33, 44)
    assert (total.prompt_tokens(), total.total()) == (11 + 33 + 44, 11 + 22 + 33 + 44)
    assert Usage.from_dict(total.to_dict()) == total


# --- retries ---------------------------------------------------------------------------


async def test_rate_limit_storm_honours_retry_after_capped_then_succeeds(
    fake: FakeAnthropicAPI, make_model: ModelFactory, sleeps: Sleeps
) -> None:
    fake.push(
        Fault.status(429, retry_after_s=3),
        Fault.status(429, retry_after_s=1.5),
        Fault.status(429, retry_after_s=500),
        Reply.text("ok"),
    )

    reply = await ask(make_model(backoff_max_s=20.0))

    assert reply.content == (TextBlock("ok"),)
    assert reply.attempts == 4
    assert sleeps.delays == [3.0, 1.5, 20.0]
    assert len(fake.requests) == 4


@pytest.mark.parametrize("status", [529, 500, 503])
async def test_overloaded_and_server_errors_are_retried_with_exponential_backoff(
    fake: FakeAnthropicAPI, make_model: ModelFactory, sleeps: Sleeps, status: int
) -> None:
    fake.push(Fault.status(status), Fault.status(status), Reply.text("ok"))

    reply = await ask(make_model(backoff_base_s=1.0))

    assert reply.attempts == 3
    first, second = sleeps.delays
    assert 0.5 <= first <= 1.0
    assert 1.0 <= second <= 2.0


async def test_backoff_never_exceeds_its_cap(
    fake: FakeAnthropicAPI, make_model: ModelFactory, sleeps: Sleeps
) -> None:
    fake.push(*[Fault.status(529)] * 5, Reply.text("ok"))

    await ask(make_model(max_attempts=6, backoff_base_s=1.0, backoff_max_s=4.0))

    assert len(sleeps.delays) == 5
    assert all(d <= 4.0 for d in sleeps.delays)
    assert sleeps.delays[-1] >= 2.0


async def test_error_event_inside_a_stream_is_retried(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    fake.push(Fault.stream_error("overloaded_error", after_events=3), Reply.text("ok"))

    reply = await ask(make_model())

    assert (reply.content, reply.attempts) == ((TextBlock("ok"),), 2)


async def test_disconnect_mid_stream_is_retried_and_on_text_starts_over(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    fake.push(Fault.disconnect(after_events=4), Reply.text("Second try."))
    seen: list[str] = []

    async def on_text(so_far: str) -> None:
        seen.append(so_far)

    reply = await ask(make_model(), on_text=on_text)

    assert reply.attempts == 2
    assert seen[0].startswith("This reply")  # from the attempt that was cut
    assert seen[-1] == "Second try."  # the retry starts over instead of appending


async def test_disconnect_before_any_response_is_retried(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    fake.push(Fault.disconnect(), Reply.text("ok"))

    reply = await ask(make_model())

    assert reply.attempts == 2


async def test_connection_refused_on_every_attempt_raises_model_unavailable(
    make_model: ModelFactory, sleeps: Sleeps
) -> None:
    model = make_model(base_url=f"http://127.0.0.1:{closed_port()}", max_attempts=3)

    with pytest.raises(ModelUnavailable) as caught:
        await ask(model)

    assert (caught.value.status, caught.value.attempts) == (None, 3)
    assert isinstance(caught.value.__cause__, anthropic.APIConnectionError)
    assert len(sleeps.delays) == 2


async def test_stalled_stream_is_cancelled_and_retried(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    fake.push(Fault.stall(after_events=3), Reply.text("ok"))

    reply = await ask(make_model(stall_timeout_s=0.2))

    assert (reply.content, reply.attempts) == ((TextBlock("ok"),), 2)


async def test_a_stalled_stream_is_retried_at_once_without_backoff(
    fake: FakeAnthropicAPI, make_model: ModelFactory, sleeps: Sleeps
) -> None:
    # the stall timeout was already spent waiting; a backoff on top only adds to it (#32.4)
    fake.push(Fault.stall(after_events=3), Reply.text("ok"))

    reply = await ask(make_model(stall_timeout_s=0.2))

    assert reply.attempts == 2
    assert sleeps.delays == [0.0]


async def test_stall_on_the_last_attempt_raises_model_stalled(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    fake.push(Fault.status(529), Fault.stall(after_events=2))

    with pytest.raises(ModelStalled) as caught:
        await ask(make_model(stall_timeout_s=0.2, max_attempts=2))

    assert (caught.value.attempts, caught.value.stall_timeout_s) == (2, 0.2)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413])
async def test_client_errors_raise_model_rejected_at_once(
    fake: FakeAnthropicAPI, make_model: ModelFactory, sleeps: Sleeps, status: int
) -> None:
    fake.push(Fault.status(status), Reply.text("never sent"))

    with pytest.raises(ModelRejected) as caught:
        await ask(make_model())

    assert caught.value.status == status
    assert caught.value.message == "scripted fault"
    assert caught.value.request_id is not None
    assert isinstance(caught.value.__cause__, anthropic.APIStatusError)
    assert len(fake.requests) == 1
    assert sleeps.delays == []


async def test_exhausted_attempts_raise_model_unavailable_with_the_last_status(
    fake: FakeAnthropicAPI, make_model: ModelFactory, sleeps: Sleeps
) -> None:
    fake.push(Fault.status(500), Fault.status(429), Fault.status(529), Reply.text("too late"))

    with pytest.raises(ModelUnavailable) as caught:
        await ask(make_model(max_attempts=3))

    assert (caught.value.status, caught.value.attempts) == (529, 3)
    assert len(fake.requests) == 3
    assert len(sleeps.delays) == 2


async def test_cancelling_the_caller_aborts_a_running_request(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    # Given a request the server never finishes
    fake.push(Fault.stall(after_events=2))
    task = asyncio.create_task(ask(make_model()))
    deadline = asyncio.get_running_loop().time() + 5
    while not fake.requests:
        assert asyncio.get_running_loop().time() < deadline, "request never arrived"
        await asyncio.sleep(0)
    # When the caller cancels
    task.cancel()
    # Then the call ends with CancelledError rather than retrying
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(fake.requests) == 1


# --- prompt layout ---------------------------------------------------------------------


def marked(block: dict[str, Any]) -> bool:
    return block.get("cache_control") == EPHEMERAL


async def test_cache_breakpoints_sit_on_system_first_message_and_last_message(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    fake.push(Reply.text("ok"))
    transcript = (
        Message("user", (TextBlock("skills index"), TextBlock("the incident"))),
        Message("assistant", (ToolUseBlock("toolu_1", "Bash", {"command": "kubectl get pods"}),)),
        Message("user", (ToolResultBlock("toolu_1", "3 pods"), TextBlock("steer: check DB"))),
    )

    await ask(make_model(), transcript)

    body = fake.requests[0].body
    messages = body["messages"]
    assert marked(body["system"][-1])
    assert not any(marked(tool) for tool in body["tools"])
    assert [marked(b) for b in messages[0]["content"]] == [False, True]
    assert [marked(b) for b in messages[1]["content"]] == [False]
    assert [marked(b) for b in messages[2]["content"]] == [False, True]
    assert fake.requests[0].raw.count(b'"cache_control"') == 3


def test_without_a_system_prompt_the_static_breakpoint_sits_on_the_last_tool() -> None:
    body = json.loads(build_request(model="m", max_tokens=5, system="", tools=TOOLS, messages=ASK))

    assert [marked(tool) for tool in body["tools"]] == [False, True]
    assert "system" not in body


async def test_equal_inputs_give_byte_identical_requests(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    fake.push(Reply.text("a"), Reply.text("b"))
    model = make_model()

    def transcript(tool_input: dict[str, Any]) -> tuple[Message, ...]:
        call = Message("assistant", (ToolUseBlock("toolu_9", "Bash", tool_input),))
        return (*ASK, call, Message("user", (ToolResultBlock("toolu_9", "a.txt"),)))

    await ask(model, transcript({"command": "ls", "timeout": 5, "description": "list"}))
    await ask(model, transcript({"description": "list", "timeout": 5, "command": "ls"}))

    first, second = fake.requests
    assert first.raw == second.raw


async def test_next_request_repeats_the_previous_bytes_up_to_its_rolling_breakpoint(
    fake: FakeAnthropicAPI, make_model: ModelFactory
) -> None:
    # Given a session whose transcript is stored as JSON between steps
    fake.push(
        Reply.tool("Bash", {"command": "kubectl get pods", "timeout": 1000}),
        Reply.tool("Read", {"file_path": "/memory/db.md"}),
        Reply.text("done"),
    )
    model = make_model()
    transcript: tuple[Message, ...] = ASK
    for _ in range(3):
        reply = await ask(model, transcript)
        call = reply.content[-1]
        if not isinstance(call, ToolUseBlock):
            break
        result = Message("user", (ToolResultBlock(call.id, "output"),))
        stored = json.dumps(to_wire((*transcript, reply.to_message(), result)), sort_keys=True)
        transcript = from_wire(json.loads(stored))
    # Then every request begins with its predecessor's bytes, cut at the rolling mark
    raws = [request.raw for request in fake.requests]
    assert len(raws) == 3
    for previous, current in itertools.pairwise(raws):
        assert current.startswith(previous[: previous.rindex(MARK)])
        assert len(current) > len(previous)


# --- messages --------------------------------------------------------------------------


def test_message_json_round_trips_every_block_type() -> None:
    message = Message(
        "user",
        (
            TextBlock("héllo"),
            ToolUseBlock("toolu_1", "Edit", {"b": [1, {"y": 2, "x": 1}], "a": None}),
            ToolResultBlock("toolu_1", "boom", is_error=True),
        ),
    )

    text = message.to_json()

    assert Message.from_json(text) == message
    assert '"input":{"a":null,"b":[1,{"x":1,"y":2}]}' in text
    assert "héllo" in text


def test_wire_tool_result_with_a_list_of_text_blocks_reads_as_joined_text() -> None:
    wire: list[dict[str, Any]] = [
        {"role": "user", "content": "plain"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]},
    ]  # fmt: skip

    plain, result = from_wire(wire)

    assert plain == Message("user", (TextBlock("plain"),))
    assert result.content == (ToolResultBlock("t", "ab"),)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"role": "system", "content": []}',
        '{"role": "user", "content": [{"type": "image"}]}',
        '{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": 1}]}',
        '{"role": "user", "content": [{"type": "text", "text": 5}]}',
    ],
)
def test_malformed_message_json_raises_invalid_message(text: str) -> None:
    with pytest.raises(InvalidMessage):
        Message.from_json(text)


@pytest.mark.parametrize(
    "fault",
    [
        Fault.status(400, message="prompt is too long: 1200000 tokens > 1000000 maximum"),
        Fault.status(413, message="Request exceeds the maximum size"),
    ],
)
async def test_an_oversized_request_is_a_context_overflow_not_retried(
    fake: FakeAnthropicAPI, make_model: ModelFactory, fault: Fault
) -> None:
    fake.push(fault)

    with pytest.raises(ModelContextOverflow):
        await ask(make_model())

    assert len(fake.requests) == 1


async def test_thinking_and_refusal_details_come_back_in_the_reply(
    make_model: ModelFactory,
) -> None:
    async with FakeAnthropicAPI(
        [Reply.refused("Sure", category="bio", explanation="Lab methods.")]
    ) as thinking_fake:
        model = make_model(base_url=thinking_fake.base_url)
        reply = await ask(model)

    assert isinstance(reply.content[0], ThinkingBlock)
    assert reply.content[0].signature
    assert reply.stop_reason == "refusal"
    assert reply.refusal == RefusalDetails("bio", "Lab methods.")
