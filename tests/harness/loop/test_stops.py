"""Every stop reason, refused request and thinking block, through ``advance`` against the
strict fake Messages API (which refuses any request the real API would)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import (
    Checkpoint,
    Inbound,
    Limits,
    ModelResponded,
    Notice,
    ThinkingBlock,
    ToolUseBlock,
)
from memory_store import Namespace, Scope
from tests.fakes.anthropic_api import FakeAnthropicAPI, Fault, Reply, Thinking, ToolCall
from tests.harness.step_support import CHANNEL, ORG, Kit, open_kit, texts_of

ASK = Inbound("U-ALICE", "Why is checkout failing?", "Alice")
INCIDENT = Namespace(ORG, Scope.INCIDENT, CHANNEL)
NOTES = {"file_path": "/incident/notes.md", "content": "# Notes\n- 500s since 14:02\n"}
TODO = {"todos": [{"content": "Check pods", "status": "pending", "activeForm": "Checking pods"}]}


@pytest.fixture
async def kit(tmp_path: Path) -> AsyncIterator[Kit]:
    async with open_kit(tmp_path) as shared:
        yield shared


def all_text(request_messages: list[dict[str, object]]) -> str:
    return "\n".join(t for m in request_messages for t in texts_of(m))


async def test_a_refusal_is_told_in_plain_words_and_the_refused_turn_is_not_continued(
    kit: Kit,
) -> None:
    # Given a model that starts an answer, then refuses it
    refused = Reply.refused(
        "Here is how to", category="cyber", explanation="This looks like exploit development."
    )
    async with FakeAnthropicAPI([refused, Reply.text("The pool is exhausted.")]) as fake:
        run = kit.session(fake.base_url)
        # When the session runs, and the user asks again
        await run.run([ASK])
        await run.run([Inbound("U-ALICE", "What does the DB pool look like?", "Alice")])

    # Then the thread is told why, in plain words
    assert "declined" in run.answers[0]
    assert "This looks like exploit development." in run.answers[0]
    assert "(cyber)" in run.answers[0]
    # And the refused turn is gone: the next request carries neither it nor its request
    later = fake.requests[1].messages
    assert "Here is how to" not in all_text(later)
    assert "Why is checkout failing?" not in all_text(later)
    assert run.answers[1] == "The pool is exhausted."


async def test_a_tool_call_cut_by_max_tokens_is_retried_once_with_twice_the_room(
    kit: Kit,
) -> None:
    # Given a Write cut off by max_tokens, then the same Write complete
    cut = Reply((ToolCall("Write", NOTES),), "max_tokens")
    script = [cut, Reply.tool("Write", NOTES), Reply.text("Noted.")]
    async with FakeAnthropicAPI(script) as fake:
        run = kit.session(fake.base_url, limits=Limits(max_tokens=4000))
        await run.run([ASK])

    # Then the retry had twice the room, and only the complete call ran
    assert [r.body["max_tokens"] for r in fake.requests[:2]] == [4000, 8000]
    written = await kit.store.read(INCIDENT, "/notes.md")
    assert written.content == NOTES["content"]
    assert run.answers == ["Noted."]


async def test_a_tool_call_still_cut_after_the_retry_is_never_run_and_the_model_is_told(
    kit: Kit,
) -> None:
    cut = Reply((ToolCall("Write", NOTES),), "max_tokens")
    async with FakeAnthropicAPI([cut, cut, Reply.text("I will write it in parts.")]) as fake:
        run = kit.session(fake.base_url, limits=Limits(max_tokens=64_000))
        await run.run([ASK])

    # Then no file was written from the partial input
    assert await kit.store.index(INCIDENT) == []
    # And the model heard that its call was cut and not run
    result = fake.requests[-1].messages[-1]["content"][0]
    assert result["type"] == "tool_result"
    assert result["is_error"] is True
    assert "was not run" in result["content"]
    assert "max_tokens" in result["content"]
    assert any(isinstance(e, Notice) and e.topic == "max_tokens" for e in run.events)


async def test_an_answer_cut_by_max_tokens_is_posted_with_a_note(kit: Kit) -> None:
    cut = Reply(("The 500s began at",), "max_tokens")
    async with FakeAnthropicAPI([cut, cut]) as fake:
        run = kit.session(fake.base_url, limits=Limits(max_tokens=100_000))
        await run.run([ASK])

    assert run.answers[0].startswith("The 500s began at")
    assert "output limit" in run.answers[0]


async def test_a_paused_turn_is_continued_by_sending_it_back_as_it_is(kit: Kit) -> None:
    script = [Reply(("Looking at the deploy log. ",), "pause_turn"), Reply.text("It was 14:01.")]
    async with FakeAnthropicAPI(script) as fake:
        run = kit.session(fake.base_url)
        await run.run([ASK])

    continued = fake.requests[1].messages
    assert continued[-1]["role"] == "assistant"
    assert "Looking at the deploy log. " in texts_of(continued[-1])
    assert run.answers == ["Looking at the deploy log. It was 14:01."]


async def test_a_context_window_exceeded_stop_compacts_and_asks_again(kit: Kit) -> None:
    # Given a session with some history, whose next reply runs out of context window
    script = [
        Reply.tool("TodoWrite", TODO),
        Reply(("The pods",), "model_context_window_exceeded"),
        Reply.text("Summary: pods checked."),
        Reply.text("Pods are fine; the DB pool is not."),
    ]
    async with FakeAnthropicAPI(script) as fake:
        run = kit.session(fake.base_url)
        await run.run([ASK])

    # Then the transcript was compacted and the question answered after it
    assert run.cp.compactions == 1
    assert "will be compacted" in all_text(fake.requests[2].messages)
    assert run.answers == ["Pods are fine; the DB pool is not."]


async def test_a_400_for_an_oversized_prompt_compacts_instead_of_crash_looping(kit: Kit) -> None:
    too_long = Fault.status(400, message="prompt is too long: 1200000 tokens > 1000000 maximum")
    script: list[Reply | Fault] = [
        Reply.tool("TodoWrite", TODO),
        too_long,
        Reply.text("Summary: pods checked."),
        Reply.text("Done."),
    ]
    async with FakeAnthropicAPI(script) as fake:
        run = kit.session(fake.base_url)
        await run.run([ASK])

    assert run.cp.compactions == 1
    assert run.answers == ["Done."]
    assert len(fake.requests) == 4  # never retried as is


@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_a_deterministic_4xx_is_told_to_the_thread_once_and_not_retried(
    kit: Kit, status: int
) -> None:
    # Given a request the API refuses for good
    script: list[Reply | Fault] = [
        Fault.status(status, message="refused for a reason"),
        Reply.text("Back."),
    ]
    async with FakeAnthropicAPI(script) as fake:
        run = kit.session(fake.base_url)
        # When the session steps, Then it does not raise: the thread hears why, once
        await run.run([ASK])
        assert len(fake.requests) == 1
        assert f"HTTP {status}" in run.answers[0]
        assert "refused for a reason" in run.answers[0]
        # And the next message is a fresh request without the refused one's text
        await run.run([Inbound("U-ALICE", "try again", "Alice")])

    assert "Why is checkout failing?" not in all_text(fake.requests[1].messages)
    assert run.answers[1] == "Back."


async def test_a_megabyte_message_is_cut_to_the_bound_and_the_user_is_told(kit: Kit) -> None:
    pasted = Inbound("U-ALICE", "log line\n" * 120_000, "Alice")
    async with FakeAnthropicAPI([Reply.text("Read the first part.")]) as fake:
        run = kit.session(fake.base_url, limits=Limits(max_input_chars=50_000))
        await run.run([pasted])

    sent = fake.requests[0].raw
    assert len(sent) < 120_000
    notices = [e.text for e in run.events if isinstance(e, Notice) and e.topic == "input"]
    assert notices == ["A message of 1,080,000 characters was cut to its first 50,000 characters."]
    assert run.answers == ["Read the first part."]


async def test_thinking_goes_back_unchanged_across_a_tool_call(kit: Kit) -> None:
    # Given a model that thinks before calling a tool (the fake signs each block)
    script = [
        Reply((Thinking("The 500s started with a deploy."), ToolCall("TodoWrite", TODO))),
        Reply.text("Done."),
    ]
    async with FakeAnthropicAPI(script) as fake:
        run = kit.session(fake.base_url)
        await run.run([ASK])

    # Then the strict fake accepted the follow-up, which carried the block as it came
    sent = fake.requests[1].messages[1]["content"][0]
    assert sent["type"] == "thinking"
    assert sent["thinking"] == "The 500s started with a deploy."
    assert fake.refusals == []
    # And the summary was given to the thread as progress
    responded = run.of_kind(ModelResponded)
    assert responded[0].thinking == "The 500s started with a deploy."


async def test_thinking_survives_a_crash_between_the_model_and_the_tool_step(kit: Kit) -> None:
    script = [
        Reply((Thinking("Check the todo list first."), ToolCall("TodoWrite", TODO))),
        Reply.text("Done."),
    ]
    async with FakeAnthropicAPI(script) as fake:
        first = kit.session(fake.base_url)
        await first.step([ASK])
        # When the worker dies and another reloads the committed checkpoint
        reloaded = Checkpoint.from_json(first.cp.to_json())
        second = kit.session(fake.base_url)
        second.cp = reloaded
        await second.run()

    thinking = [b for b in reloaded.messages[1].content if isinstance(b, ThinkingBlock)]
    assert thinking == [b for b in first.cp.messages[1].content if isinstance(b, ThinkingBlock)]
    assert any(isinstance(b, ToolUseBlock) for b in reloaded.messages[1].content)
    assert fake.refusals == []
    assert second.answers == ["Done."]


async def test_compaction_drops_old_thinking_and_the_next_request_is_accepted(kit: Kit) -> None:
    script = [
        Reply((Thinking("first"), ToolCall("TodoWrite", TODO))),
        Reply((Thinking("second"), ToolCall("TodoWrite", TODO))),
        Reply.text("Summary."),
        Reply.text("Answer."),
    ]
    async with FakeAnthropicAPI(script) as fake:
        run = kit.session(fake.base_url, limits=Limits(compact_at_tokens=1))
        await run.run([ASK])

    assert run.cp.compactions >= 1
    assert fake.refusals == []
    assert run.answers == ["Answer."]
