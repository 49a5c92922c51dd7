"""The model step: build the next user message, ask the model, commit what it settled on.

What each stop reason does is decided in ``stops``; this module applies it to the
checkpoint. A prompt that does not fit (a 400/413 overflow, or
``model_context_window_exceeded``) is compacted and asked again once. Any other
deterministic refusal of the request (``ModelRejected``: 400, 401, 403, 404, …) is a
permanent error told to the thread, never retried as a crash: the user's new text is
dropped and the new tool results are replaced by a note, so the next turn does not
send the same poisoned request (issue #12 item 8).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from harness.errors import CostLimitReached, LimitReached, ModelContextOverflow, ModelRejected
from harness.loop.checkpoint import Checkpoint
from harness.loop.events import Answered, Event, ModelResponded, Notice, NoticeTopic
from harness.loop.limits import Limits
from harness.loop.mcp_reminder import note_server_changes
from harness.loop.prompt import system_prompt
from harness.loop.stops import (
    Calls,
    Finished,
    Overflowed,
    Refused,
    ask,
    cut_call_result,
    refusal_text,
    settle,
)
from harness.loop.todo_reminder import todo_reminder
from harness.loop.turn import build_user_message, compact, final_answer_text
from harness.mcp.servers import McpTool
from harness.model.adapter import Model, ModelReply
from harness.model.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from harness.model.transcript import appended
from harness.recall.related import Recall
from harness.tools.mcp_call import mcp_specs
from harness.tools.toolbox import AGENT_TOOL, WAKEUP_TOOL, summarize_call, tool_specs
from memory_store import FileStore


async def model_step(
    cp: Checkpoint,
    store: FileStore,
    model: Model,
    limits: Limits,
    limit: LimitReached | None = None,
    offered: Sequence[McpTool] = (),
    *,
    recall: Recall | None = None,
) -> tuple[Checkpoint, list[Event]]:
    """Ask the model; at a ``limit``, for a final answer without tool calls.

    ``offered`` are the MCP tools the session may use now (after the built-in tools in
    the request); a server gone or back since the last model call is told in a notice.
    ``recall`` finds the related past incidents the first message lists (None: none).

    Returns the new checkpoint (its ``answer`` set when the turn ended) and the events.

    Raises:
        ModelUnavailable, ModelStalled: transient failures after retries (nothing to commit).
    """
    tools = tool_specs(mcp_specs(offered))
    if cp.parent is not None:  # a subagent starts no subagents of its own, and ends
        # when it answers: a wake-up it scheduled would never fire
        tools = tuple(t for t in tools if t.name not in (AGENT_TOOL, WAKEUP_TOOL))
    system = system_prompt(limits.services, cp.channel_id)
    cp, told_mcp = note_server_changes(cp, offered)
    events: list[Event] = [*told_mcp]
    did_compact = False
    if cp.last_input_tokens >= limits.compact_at_tokens and len(cp.messages) > 2:
        cp, compacted = await compact(cp, model, limits, tools)
        events += compacted
        did_compact = True
    for attempt in (1, 2):
        user, built, told = await build_user_message(
            cp, store, limit=limit, limits=limits, recall=recall
        )
        user = _with_todo_reminder(user, built, compacted=did_compact and limit is None)
        messages = appended(built.messages, user)
        try:
            reply = await ask(
                model, messages, max_tokens=limits.max_tokens, tools=tools, system=system
            )
        except ModelContextOverflow as exc:
            if attempt == 1 and _compactable(cp):
                cp, compacted = await compact(cp, model, limits, tools)
                events += compacted
                did_compact = True
                continue
            return _rejected(built, exc, events)
        except ModelRejected as exc:
            return _rejected(built, exc, events)
        settled = settle(reply)
        if isinstance(settled, Overflowed) and attempt == 1 and _compactable(cp):
            cp, compacted = await compact(
                replace(cp, usage=cp.usage + reply.usage), model, limits, tools
            )
            events += compacted
            did_compact = True
            continue
        return _apply(built, messages, reply, settled, [*events, *told], limit)
    raise AssertionError("unreachable: the second attempt returns")


def capped(cp: Checkpoint, limit: CostLimitReached) -> tuple[Checkpoint, list[Event]]:
    """End the turn at a spending cap without a model call: a best-effort answer from
    what the session has (its todo list), naming the cap and how to continue. New user
    text is not given to the model (the answer says so); pending tool results are closed.
    """
    parts = [f"{limit} I stopped without asking the model anything more."]
    done = [t.content for t in cp.todos if t.status == "completed"]
    left = [t.content for t in cp.todos if t.status != "completed"]
    if done or left:
        parts.append("Where the work stands:")
        parts.append("\n".join([f"- [x] {c}" for c in done] + [f"- [ ] {c}" for c in left]))
    parts.append("Notes written so far are under `/incident/`.")
    if cp.pending_input:
        parts.append("Your last message was not given to the model: send it again then.")
    parts.append("_(To continue, raise the cap and reply in this thread.)_")
    text = "\n\n".join(parts)
    events: list[Event] = [Notice(topic=NoticeTopic.LIMIT, text=str(limit))]
    return _ended(cp, text, f"withheld: the {limit.name} was reached", events)


def _apply(
    cp: Checkpoint,
    messages: Sequence[Message],
    reply: ModelReply,
    settled: Finished | Calls | Refused | Overflowed,
    events: list[Event],
    limit: LimitReached | None,
) -> tuple[Checkpoint, list[Event]]:
    counted = replace(
        cp,
        steps=cp.steps + 1,
        usage=cp.usage + reply.usage,
        last_input_tokens=reply.usage.prompt_tokens(),
    )
    if isinstance(settled, Refused | Overflowed):
        refused = isinstance(settled, Refused)
        text = refusal_text(settled.details) if isinstance(settled, Refused) else _OVERFLOW
        topic = NoticeTopic.REFUSAL if refused else NoticeTopic.CONTEXT_WINDOW_EXCEEDED
        events.append(Notice(topic=topic, text=text))
        return _ended(counted, text, "withheld: the model declined to continue", events)
    assistant = Message("assistant", reply.content)
    cp = replace(
        counted, messages=appended(messages, assistant), pending_input=(), pending_results=()
    )
    calls = settled.calls if isinstance(settled, Calls) else ()
    events.append(_responded(reply, calls))
    if isinstance(settled, Calls) and settled.cut is not None:
        note = cut_call_result(settled.cut)
        cp = replace(cp, pending_results=(ToolResultBlock(settled.cut.id, note, True),))
        events.append(Notice(topic=NoticeTopic.MAX_TOKENS, text=note))
    if calls and limit is None:
        return cp, events
    text = settled.text if isinstance(settled, Finished) else _text(reply)
    if limit is not None:
        events.append(Notice(topic=NoticeTopic.LIMIT, text=str(limit)))
        messages = appended(cp.messages[:-1], _text_only(assistant))
        cp = replace(cp, messages=messages, pending_results=())
    answer = final_answer_text(text, limit=limit, cp=cp)
    events.append(Answered(text=answer, best_effort=limit is not None))
    return replace(cp, answer=answer, best_effort=limit is not None), events


_OVERFLOW = (
    "This conversation no longer fits the model's context window, even after compacting it. "
    "Please start a new thread."
)


def _rejected(
    cp: Checkpoint, exc: ModelRejected, events: list[Event]
) -> tuple[Checkpoint, list[Event]]:
    """A permanent refusal of the request: told to the thread; the new input, if the
    request carried any, is dropped (and the text says so)."""
    where = f" (request id {exc.request_id})" if exc.request_id else ""
    dropped = "; your last message was not given to the model" if cp.pending_input else ""
    text = (
        f"The model API refused this request (HTTP {exc.status}, "
        f"{exc.error_type or 'error'}): {exc.message}{where}. It will not be retried as "
        f"is{dropped}."
    )
    events.append(Notice(topic=NoticeTopic.MODEL_REJECTED, text=text))
    why = f"not delivered: the model API refused the request that carried it ({exc.message})"
    return _ended(cp, text, why, events)


def _ended(
    cp: Checkpoint, text: str, why: str, events: list[Event]
) -> tuple[Checkpoint, list[Event]]:
    """End the turn with ``text`` without the request that failed: the user's new text is
    dropped, and pending tool results are closed with a note saying ``why`` (so every
    ``tool_use`` stays answered and the session waits for the user, not the model)."""
    if cp.pending_results:
        closed = tuple(
            ToolResultBlock(r.tool_use_id, f"(Result {why}.)", True) for r in cp.pending_results
        )
        stopped = Message("assistant", (TextBlock(f"(Stopped: {why}.)"),))
        cp = replace(
            cp, messages=appended(cp.messages, Message("user", closed), stopped), pending_results=()
        )
    cp = replace(cp, pending_input=(), answer=text, best_effort=True)
    events.append(Answered(text=text, best_effort=True))
    return cp, events


def _responded(reply: ModelReply, calls: tuple[ToolUseBlock, ...]) -> ModelResponded:
    thinking = "\n\n".join(
        b.thinking.strip() for b in reply.content if isinstance(b, ThinkingBlock) and b.thinking
    )
    return ModelResponded(
        stop_reason=reply.stop_reason,
        text=_text(reply),
        tool_calls=tuple(summarize_call(c.name, c.input) for c in calls),
        usage=reply.usage,
        attempts=reply.attempts,
        thinking=thinking,
    )


def _text(reply: ModelReply) -> str:
    return "".join(b.text for b in reply.content if isinstance(b, TextBlock))


def _with_todo_reminder(user: Message, cp: Checkpoint, *, compacted: bool) -> Message:
    """``user`` with the todo reminder at its end when one is due (``todo_reminder``)."""
    text = todo_reminder(cp, compacted=compacted)
    if text is None:
        return user
    return Message(role=user.role, content=(*user.content, TextBlock(text)))


def _text_only(message: Message) -> Message:
    blocks = tuple(b for b in message.content if isinstance(b, TextBlock))
    return Message(role=message.role, content=blocks or (TextBlock("(no answer text)"),))


def _compactable(cp: Checkpoint) -> bool:
    """Whether compacting would shrink the prompt: there is a transcript to summarise."""
    return len(cp.messages) >= 2
