"""Building the next user message, and compaction (docs/architecture.md §4).

The next user message carries, in order: the tool results of the last
assistant message, notices inside ``<system-reminder>`` (files changed by
others, new shared files, sandbox events), then teammates' messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from harness.errors import LimitReached
from harness.loop.checkpoint import Checkpoint, ReadRecord
from harness.loop.events import Event, InputGiven, Notice
from harness.loop.limits import Limits
from harness.loop.notices import change_notices
from harness.loop.prompt import (
    SYSTEM_PROMPT,
    FrozenContext,
    frozen_context,
    reminder,
    steering_text,
)
from harness.model.adapter import Model, ToolSpec
from harness.model.messages import ContentBlock, Message, TextBlock, ToolResultBlock
from harness.tools.toolbox import tool_specs
from memory_store import FileStore, IndexEntry, Namespace, Scope

_SCOPES: tuple[tuple[str, Scope], ...] = (
    ("/skills", Scope.SKILLS),
    ("/memory", Scope.MEMORY),
    ("/incident", Scope.INCIDENT),
)


def final_reminder(limit: LimitReached) -> str:
    """Tells the model to answer now, without tools, because of ``limit``."""
    return reminder(
        f"{limit} Do not call any more tools. Answer now with what you know: findings so "
        "far, evidence, and what is left to check."
    )


def namespace(cp: Checkpoint, scope: Scope) -> Namespace:
    """The store namespace of ``scope`` for this session's org and channel."""
    channel = cp.channel_id if scope is Scope.INCIDENT else ""
    return Namespace(cp.org_id, scope, channel)


async def _indexes(cp: Checkpoint, store: FileStore) -> dict[str, list[IndexEntry]]:
    return {root: await store.index(namespace(cp, scope)) for root, scope in _SCOPES}


def _known(indexes: dict[str, list[IndexEntry]]) -> dict[str, int]:
    return {root + e.path: e.version for root, entries in indexes.items() for e in entries}


async def _first_message(cp: Checkpoint, store: FileStore) -> tuple[list[ContentBlock], Checkpoint]:
    indexes = await _indexes(cp, store)
    requester = cp.requester.display_name or f"<@{cp.requester.user_id}>"
    context = FrozenContext(
        skills=indexes["/skills"],
        memory=indexes["/memory"],
        incident=indexes["/incident"],
        requester=requester,
        channel_id=cp.channel_id,
    )
    return [TextBlock(frozen_context(context))], replace(cp, known_files=_known(indexes))


async def _new_files(cp: Checkpoint, store: FileStore) -> tuple[list[str], Checkpoint]:
    indexes = await _indexes(cp, store)
    lines: list[str] = []
    for root, entries in indexes.items():
        for e in entries:
            path = root + e.path
            if path in cp.known_files or path in cp.read_state:
                continue
            lines.append(f"- {path}: {e.summary}")
    if not lines:
        return [], replace(cp, known_files={**cp.known_files, **_known(indexes)})
    text = "New shared files were added by others since you started:\n" + "\n".join(lines)
    return [reminder(text)], replace(cp, known_files={**cp.known_files, **_known(indexes)})


async def build_user_message(
    cp: Checkpoint, store: FileStore, *, limit: LimitReached | None = None
) -> tuple[Message, Checkpoint, list[Event]]:
    """The next user message, the checkpoint updated for what it tells, and events.

    ``limit`` set: the session is at a limit, and the message ends by asking for a
    final answer without tools.

    Raises:
        memory_store.StoreError: the store could not be read.
    """
    blocks: list[ContentBlock] = list(cp.pending_results)
    events: list[Event] = []
    if not cp.messages:
        first, cp = await _first_message(cp, store)
        blocks.extend(first)
    else:
        changed, updates = await change_notices(store, cp)
        cp = replace(cp, read_state={**cp.read_state, **updates})
        added, cp = await _new_files(cp, store)
        texts = [*changed, *added, *(reminder(n) for n in cp.notices)]
        blocks.extend(TextBlock(t) for t in texts)
        events.extend(Notice(topic="files", text=t) for t in (*changed, *added))
    inputs = [steering_text(i.user_label(), i.text) for i in cp.pending_input]
    if not cp.messages:
        inputs = [i.text for i in cp.pending_input]
    blocks.extend(TextBlock(t) for t in inputs)
    if cp.pending_input:
        events.append(InputGiven(texts=tuple(i.text for i in cp.pending_input)))
        cp = replace(cp, turns=cp.turns + 1)
    if limit is not None:
        blocks.append(TextBlock(final_reminder(limit)))
    if not blocks:
        blocks.append(TextBlock("Continue."))
    cp = replace(cp, notices=())
    return Message(role="user", content=tuple(blocks)), cp, events


SUMMARY_REQUEST = reminder(
    "The conversation is near the context limit and will be compacted. Write a summary of the "
    "investigation so far for your own later use: the request and who asked, findings with their "
    "evidence, commands run and what they showed, files you wrote in /incident/ and /memory/, "
    "open hypotheses, and the next steps you planned. Do not call tools."
)


async def compact(
    cp: Checkpoint, model: Model, limits: Limits, tools: Sequence[ToolSpec] | None = None
) -> tuple[Checkpoint, list[Event]]:
    """Summarise the transcript into a new first message.

    ``tools`` are the session's tools (default: the built-in ones), sent as they are
    so the summary call reuses the cached prefix.

    Pending tool results are given to the summary call, so no ``tool_use`` is left
    unanswered. Read-state is carried forward as *partial* reads: a file whose content
    was compacted away must be read again before Write may overwrite it.

    Raises:
        ModelError: the summary call failed.
    """
    request_blocks: Sequence[ContentBlock] = (*cp.pending_results, TextBlock(SUMMARY_REQUEST))
    messages = (*cp.messages, Message(role="user", content=tuple(request_blocks)))
    reply = await model.complete(
        system=SYSTEM_PROMPT,
        tools=tool_specs() if tools is None else tools,
        messages=messages,
        max_tokens=limits.max_tokens,
    )
    summary = "".join(b.text for b in reply.content if isinstance(b, TextBlock)).strip()
    first_context = next(
        (b for b in cp.messages[0].content if isinstance(b, TextBlock)), TextBlock("")
    )
    new_first = Message(
        role="user",
        content=(
            first_context,
            TextBlock(
                reminder(
                    "This session was compacted. Summary of the work so far:\n\n"
                    + (summary or "(no summary)")
                    + "\n\nFiles you read before compaction must be read again before you "
                    "overwrite them."
                )
            ),
        ),
    )
    ack = Message(role="assistant", content=(TextBlock("Understood. Continuing."),))
    read_state = {
        path: ReadRecord(version=r.version, full=False, notified_version=r.notified_version)
        for path, r in cp.read_state.items()
    }
    cp = replace(
        cp,
        messages=(new_first, ack),
        pending_results=(),
        read_state=read_state,
        usage=cp.usage + reply.usage,
        last_input_tokens=0,
        compactions=cp.compactions + 1,
    )
    return cp, [Notice(topic="compaction", text="The conversation was compacted.")]


def final_answer_text(text: str, *, limit: LimitReached | None, cp: Checkpoint) -> str:
    """The answer to post; at a limit, never a bare error (the todo list stands in
    for an empty answer)."""
    text = text.strip()
    if limit is None:
        return text or "(I have nothing to add.)"
    done = [t.content for t in cp.todos if t.status == "completed"]
    left = [t.content for t in cp.todos if t.status != "completed"]
    parts = [text] if text else [f"I reached this session's {limit.name} before finishing."]
    if not text and (done or left):
        parts += [f"- [x] {c}" for c in done] + [f"- [ ] {c}" for c in left]
    parts.append(f"_(Stopped at the session's {limit.name}; this is my best answer so far.)_")
    return "\n\n".join(parts)


def tool_result_text(block: ToolResultBlock) -> str:
    """A tool result's content (for summaries)."""
    return block.content
