"""The next user message and compaction (``harness.loop.turn``), over a real store and model.

These build checkpoints directly (a transcript with a pending tool call, a read-state)
to check one turn's assembly in isolation; ``test_step.py`` checks the same through
``advance``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from harness import (
    Checkpoint,
    Inbound,
    InputGiven,
    Limits,
    Message,
    Notice,
    ReadRecord,
    StepLimitReached,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from harness.loop.prompt import FIRST_CONTEXT_MAX_BYTES
from harness.loop.turn import build_user_message, compact
from memory_store import FileStore, Namespace, Origin, Scope
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply
from tests.harness.step_support import CHANNEL, ORG, Kit, new_checkpoint, open_kit, texts_of

MEMORY = Namespace(ORG, Scope.MEMORY)
INCIDENT = Namespace(ORG, Scope.INCIDENT, CHANNEL)
OTHER = Origin("U-BOB", "s-other", None)
CALL = ToolUseBlock("toolu_1", "Read", {"file_path": "/memory/payments.md"})


@pytest.fixture
async def kit(tmp_path: Path) -> AsyncIterator[Kit]:
    async with open_kit(tmp_path) as shared:
        yield shared


async def mid_turn(store: FileStore) -> Checkpoint:
    """A session that read the runbook (v1) and has the result of its pending call."""
    await store.write(MEMORY, "/payments.md", "pool: 20\n", OTHER, expected_version=0)
    first = Message("user", (TextBlock("<system-reminder>\nindexes\n</system-reminder>"),))
    return replace(
        new_checkpoint("s-turn"),
        messages=(first, Message("assistant", (CALL,))),
        pending_results=(ToolResultBlock("toolu_1", "     1\tpool: 20"),),
        read_state={"/memory/payments.md": ReadRecord(version=1, full=True, notified_version=1)},
        known_files={"/memory/payments.md": 1},
    )


async def test_the_next_message_orders_results_then_notices_then_teammates(kit: Kit) -> None:
    # Given: a pending result, a file changed by another session, a new note, a
    # sandbox notice, and a teammate's reply
    cp = await mid_turn(kit.store)
    await kit.store.write(MEMORY, "/payments.md", "pool: 50\n", OTHER, expected_version=1)
    await kit.store.write(INCIDENT, "/db.md", "DB graphs\n", OTHER, expected_version=0)
    cp = replace(
        cp,
        notices=("The sandbox was replaced by a new one (sbx-2).",),
        pending_input=(Inbound("U-BOB", "check the pool", "Bob"),),
    )

    # When: the next user message is built
    message, after, events = await build_user_message(cp, kit.store)

    # Then: tool results, the three reminders, then the teammate, in that order
    blocks = message.to_dict()["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "text", "text", "text", "text"]
    texts = texts_of(message.to_dict())
    assert texts[0] == "     1\tpool: 20"
    assert texts[1].startswith("<system-reminder>\nNote: /memory/payments.md was changed by")
    assert texts[1].endswith("(shown with line numbers):\n1\tpool: 50\n</system-reminder>")
    assert texts[2] == (
        "<system-reminder>\nNew shared files were added by others since you started:\n"
        "- /incident/db.md: DB graphs\n</system-reminder>"
    )
    assert texts[3] == (
        "<system-reminder>\nThe sandbox was replaced by a new one (sbx-2).\n</system-reminder>"
    )
    assert texts[4] == "Message from Bob in the incident thread:\ncheck the pool"
    # And: what was told is recorded, so it is not told again
    assert after.notices == ()
    assert after.read_state["/memory/payments.md"] == ReadRecord(1, True, notified_version=2)
    assert after.known_files["/incident/db.md"] == 1
    assert after.turns == cp.turns + 1
    assert [type(e) for e in events] == [Notice, Notice, InputGiven]
    # And: the notices people see (the thread, the chat) carry no model markup
    shown = [e.text for e in events if isinstance(e, Notice)]
    assert shown[1] == (
        "New shared files were added by others since you started:\n- /incident/db.md: DB graphs"
    )
    assert not any("system-reminder" in text for text in shown)


async def test_a_change_already_told_is_not_told_again(kit: Kit) -> None:
    cp = await mid_turn(kit.store)
    await kit.store.write(MEMORY, "/payments.md", "pool: 50\n", OTHER, expected_version=1)
    _, told, _ = await build_user_message(cp, kit.store)

    again, _, events = await build_user_message(replace(told, pending_results=()), kit.store)

    assert texts_of(again.to_dict()) == ["Continue."]
    assert events == []


async def test_a_message_at_a_limit_ends_by_asking_for_the_answer_without_tools(
    kit: Kit,
) -> None:
    cp = await mid_turn(kit.store)

    message, _, _ = await build_user_message(
        cp, kit.store, limit=StepLimitReached(used=200, limit=200)
    )

    assert texts_of(message.to_dict())[-1] == (
        "<system-reminder>\nThe session reached its step limit: 200 steps used, 200 allowed. "
        "Do not call any more tools. Answer now with what you know: findings so far, "
        "evidence, and what is left to check.\n</system-reminder>"
    )


async def test_compaction_keeps_the_frozen_context_and_makes_every_read_partial(
    kit: Kit,
) -> None:
    # Given: a session mid-turn, with a result still pending for the model
    cp = await mid_turn(kit.store)
    async with FakeAnthropicAPI([Reply.text("  Summary: pool is 20.  ")]) as fake:
        model = kit.session(fake.base_url).model

        # When: it is compacted
        compacted, events = await compact(cp, model, Limits())

    # Then: the summary call answered the pending call, and the transcript is two messages
    asked = fake.requests[0].messages
    assert [b["type"] for b in asked[-1]["content"]] == ["tool_result", "text"]
    first, ack = compacted.messages
    assert first.content[0] == cp.messages[0].content[0]
    assert isinstance(first.content[1], TextBlock)
    assert "Summary: pool is 20.\n\nFiles you read before compaction" in first.content[1].text
    assert ack == Message("assistant", (TextBlock("Understood. Continuing."),))
    assert compacted.pending_results == ()
    assert compacted.read_state == {"/memory/payments.md": ReadRecord(1, False, 1)}
    assert (compacted.compactions, compacted.last_input_tokens) == (1, 0)
    assert compacted.usage.output_tokens > 0
    assert [e.topic for e in events if isinstance(e, Notice)] == ["compaction"]


async def test_compaction_never_keeps_an_over_budget_first_block(kit: Kit) -> None:
    # Given: a session whose first message holds a 600 KB index (made before budgets)
    cp = await mid_turn(kit.store)
    huge = "<system-reminder>\n" + "- /memory/x.md: a line of an index\n" * 18_000
    huge += "</system-reminder>"
    cp = replace(cp, messages=(Message("user", (TextBlock(huge),)), *cp.messages[1:]))
    async with FakeAnthropicAPI([Reply.text("Summary.")]) as fake:
        compacted, _ = await compact(cp, kit.session(fake.base_url).model, Limits())

    # Then: the kept block is within the first message's budget and says it was cut
    kept = compacted.messages[0].content[0]
    assert isinstance(kept, TextBlock)
    assert len(kept.text.encode()) <= FIRST_CONTEXT_MAX_BYTES <= 30_000 + 2_048  # + related
    assert kept.text.endswith("(index cut; use Glob and Grep to find files)\n</system-reminder>")
