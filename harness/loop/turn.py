"""Building the next user message, and compaction (docs/architecture.md §4).

The next user message carries, in order: the tool results of the last
assistant message, notices inside ``<system-reminder>`` (files changed by
others, new shared files, sandbox events), then teammates' messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from harness.errors import LimitReached, ModelContextOverflow
from harness.loop.budget import Item, fit
from harness.loop.checkpoint import Checkpoint, ReadRecord
from harness.loop.events import Event, InputGiven, Notice, NoticeTopic
from harness.loop.limits import Limits
from harness.loop.notices import change_notices
from harness.loop.prompt import (
    NEW_FILES_MAX_BYTES,
    FrozenContext,
    frozen_context,
    reminder,
    steering_text,
    system_prompt,
    unwrapped,
    within_budget,
)
from harness.model.adapter import Model, ToolSpec
from harness.model.messages import (
    ContentBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    dumps,
)
from harness.model.transcript import appended
from harness.recall.related import Recall
from harness.record.postmortem import is_postmortem_request, request_for_model
from harness.tools.toolbox import tool_specs
from memory_store import FileStore, IndexEntry, Namespace, Scope

NEW_FILES_MORE = "- … and {n} more new files: use Glob to find them"
_SCOPES: tuple[tuple[str, Scope], ...] = tuple(
    (f"/{scope.value}", scope) for scope in (Scope.SKILLS, Scope.MEMORY, Scope.INCIDENT)
)  # the order the first message lists them in


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


async def _first_message(
    cp: Checkpoint, store: FileStore, recall: Recall | None
) -> tuple[list[ContentBlock], Checkpoint]:
    indexes = await _indexes(cp, store)
    requester = cp.requester.display_name or f"<@{cp.requester.user_id}>"
    context = FrozenContext(
        skills=indexes["/skills"],
        memory=indexes["/memory"],
        incident=indexes["/incident"],
        requester=requester,
        channel_id=cp.channel_id,
        related=await _related(cp, recall),
    )
    return [TextBlock(frozen_context(context))], replace(cp, known_files=_known(indexes))


async def _related(cp: Checkpoint, recall: Recall | None) -> tuple[str, ...]:
    """The related past incidents' lines for the first message (none for a subagent, a
    postmortem request, or without a request from a person). The session's first text is
    the query; labels an alert wrote in it count as the alert's (``harness.recall.query``)."""
    if recall is None or cp.parent is not None:
        return ()
    first = next((item for item in cp.pending_input if item.from_user), None)
    if first is None or is_postmortem_request(first.text):
        return ()
    return tuple(await recall.at_start(cp.org_id, cp.channel_id, cp.session_id, first.text))


async def _new_files(cp: Checkpoint, store: FileStore) -> tuple[list[str], Checkpoint]:
    """Tell of shared files nobody told this session about; paths and versions are read
    every step, summaries only of a tree that has such a file."""
    items: list[Item] = []
    known: dict[str, int] = {}
    trees = await store.versions_of([namespace(cp, scope) for _, scope in _SCOPES])
    for (root, scope), versions in zip(_SCOPES, trees, strict=True):
        known |= {root + path: version for path, version in versions.items()}
        if all(root + p in cp.known_files or root + p in cp.read_state for p in versions):
            continue
        items += [
            Item(root + e.path, e.summary)
            for e in await store.index(namespace(cp, scope))
            if (root + e.path) not in cp.known_files
            and (root + e.path) not in cp.read_state
            and (root != "/skills" or e.listed)
        ]
    cp = replace(cp, known_files={**cp.known_files, **known})
    if not items:
        return [], cp
    lines = fit(items, NEW_FILES_MAX_BYTES, NEW_FILES_MORE)
    text = "New shared files were added by others since you started:\n" + "\n".join(lines)
    return [reminder(text)], cp


def bounded_input(text: str, max_chars: int) -> tuple[str, str | None]:
    """``text`` cut to ``max_chars`` characters, and the notice saying so (None: not cut).

    >>> bounded_input("abcdef", 4)
    ('abcd', 'A message of 6 characters was cut to its first 4 characters.')
    """
    if len(text) <= max_chars:
        return text, None
    return text[:max_chars], (
        f"A message of {len(text):,} characters was cut to its first {max_chars:,} characters."
    )


async def build_user_message(
    cp: Checkpoint,
    store: FileStore,
    *,
    limit: LimitReached | None = None,
    limits: Limits | None = None,
    recall: Recall | None = None,
) -> tuple[Message, Checkpoint, list[Event]]:
    """The next user message, the checkpoint updated for what it tells, and events.

    The first message lists the related past incidents ``recall`` finds (None: none).

    ``limit`` set: the session is at a limit, and the message ends by asking for a
    final answer without tools. Each user text is bounded by ``limits.max_input_chars``;
    a cut one is followed by a reminder to the model and a ``Notice`` (topic ``input``)
    for the thread.

    Raises:
        memory_store.StoreError: the store could not be read.
    """
    blocks: list[ContentBlock] = [*cp.pending_results, *map(TextBlock, cp.follow_ups)]
    events: list[Event] = []
    if not cp.messages:
        first, cp = await _first_message(cp, store, recall)
        blocks.extend(first)
    else:
        changed, updates = await change_notices(store, cp)
        cp = replace(cp, read_state={**cp.read_state, **updates})
        added, cp = await _new_files(cp, store)
        texts = [*changed, *added, *(reminder(n) for n in cp.notices)]
        blocks.extend(TextBlock(t) for t in texts)
        shown = (unwrapped(t) for t in (*changed, *added))  # people get no model markup
        events.extend(Notice(topic=NoticeTopic.FILES, text=t) for t in shown)
    max_chars = (limits or Limits()).max_input_chars
    for item in cp.pending_input:
        text, cut = bounded_input(
            request_for_model(item.text) if item.from_user else item.text, max_chars
        )
        text = text if text.strip() else "(an empty message)"  # the API refuses blank text
        steering = cp.messages and item.from_user
        blocks.append(TextBlock(steering_text(item.user_label(), text) if steering else text))
        if cut is not None:
            blocks.append(TextBlock(reminder(cut + " Tell the user you only read that part.")))
            events.append(Notice(topic=NoticeTopic.INPUT, text=cut))
    if cp.pending_input:
        given = tuple(bounded_input(i.text, max_chars)[0] for i in cp.pending_input)
        events.append(InputGiven(texts=given))
        cp = replace(cp, turns=cp.turns + 1)
    if limit is not None:
        blocks.append(TextBlock(final_reminder(limit)))
    if not blocks:
        blocks.append(TextBlock("Continue."))
    cp = replace(cp, notices=(), follow_ups=())
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

    ``tools`` are the session's tools (default: the built-in ones), sent as they are, with
    the session's system prompt, so the summary call reuses the cached prefix.

    Pending tool results are given to the summary call, so no ``tool_use`` is left
    unanswered. Read-state is carried forward as *partial* reads: a file whose content
    was compacted away must be read again before Write may overwrite it.

    Raises:
        ModelError: the summary call failed.
    """
    request_blocks: Sequence[ContentBlock] = (
        *cp.pending_results,
        *map(TextBlock, cp.follow_ups),
        TextBlock(SUMMARY_REQUEST),
    )
    messages = appended(cp.messages, Message(role="user", content=tuple(request_blocks)))
    tools = tool_specs() if tools is None else tools
    system = system_prompt(limits.services, cp.channel_id)
    try:
        reply = await model.complete(
            system=system,
            tools=tools,
            messages=messages,
            max_tokens=limits.max_tokens,
        )
    except ModelContextOverflow:
        # Too long to summarise in place: summarise a bounded plain-text rendering instead
        # (no thinking or tool blocks, so none of the API's pairing rules can break).
        text = transcript_text(cp, max_chars=limits.compact_at_tokens * 2)
        rendered = Message("user", (TextBlock(text), TextBlock(SUMMARY_REQUEST)))
        reply = await model.complete(
            system=system,
            tools=tools,
            messages=(rendered,),
            max_tokens=limits.max_tokens,
        )
    summary = "".join(b.text for b in reply.content if isinstance(b, TextBlock)).strip()
    first_context = next(
        (b for b in cp.messages[0].content if isinstance(b, TextBlock)), TextBlock("")
    )
    first_context = TextBlock(within_budget(first_context.text))
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
        follow_ups=(),
        read_state=read_state,
        usage=cp.usage + reply.usage,
        last_input_tokens=0,
        compactions=cp.compactions + 1,
    )
    return cp, [Notice(topic=NoticeTopic.COMPACTION, text="The conversation was compacted.")]


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


def transcript_text(cp: Checkpoint, *, max_chars: int) -> str:
    """The transcript as plain text, its newest ``max_chars`` characters (each tool
    result cut to 2,000 characters; thinking left out)."""
    lines: list[str] = []
    blocks = [(m.role, b) for m in cp.messages for b in m.content]
    blocks += [("user", b) for b in cp.pending_results]
    for role, block in blocks:
        if isinstance(block, TextBlock):
            lines.append(f"[{role}] {block.text}")
        elif isinstance(block, ToolUseBlock):
            lines.append(f"[tool call {block.name}] {dumps(dict(block.input))}")
        elif isinstance(block, ToolResultBlock):
            lines.append(f"[tool result] {block.content[:2000]}")
    text = "\n\n".join(lines)
    head = "The transcript so far (oldest part left out when long):\n\n"
    return head + text[-max_chars:]


def tool_result_text(block: ToolResultBlock) -> str:
    """A tool result's content (for summaries)."""
    return block.content
