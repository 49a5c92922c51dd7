"""Every ``stop_reason`` of the Messages API, handled in one place.

``ask`` makes the model call of a step: a ``pause_turn`` is continued by sending the
paused turn back as it is; a ``max_tokens`` stop is retried once with twice the room
(up to the model's ceiling). ``settle`` then turns the final reply into what the step
does next, one ``Settled`` kind per stop reason (Anthropic, "Stop reasons and
fallback"; SDK ``StopReason``):

========================  ==================================================================
``end_turn``, ``stop_sequence``  ``Finished``: post the text.
``tool_use``              ``Calls``: run the calls.
``max_tokens``            a cut-off call is never run (``Calls`` with ``cut`` set: it is
                          answered with an error telling the model why); cut-off text is
                          posted with a note (``Finished``).
``refusal``               ``Refused``: the turn is dropped from the transcript and the
                          thread is told in plain words, with ``stop_details``.
``model_context_window_exceeded``  ``Overflowed``: compact and ask again.
``pause_turn``            continued inside ``ask``; still paused after that: ``Finished``.
========================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from harness.loop.prompt import SYSTEM_PROMPT
from harness.model.adapter import Model, ModelReply, RefusalDetails, ToolSpec
from harness.model.catalog import MODELS
from harness.model.messages import Message, TextBlock, ToolUseBlock
from harness.model.transcript import appended
from harness.tools.toolbox import tool_specs

MAX_PAUSES = 5
CUT_TEXT_NOTE = "_(This answer was cut off at the model's output limit.)_"


def cut_call_result(call: ToolUseBlock) -> str:
    """What the model is told about a call cut off by ``max_tokens`` (it was not run)."""
    return (
        f"This {call.name} call was not run: your response reached the output token limit "
        "(max_tokens) before the call's input was complete. Make the call again with a "
        "smaller input (for a large file, write it in parts)."
    )


@dataclass(frozen=True)
class Finished:
    """The turn ended with ``text`` (already marked when it was cut off)."""

    text: str


@dataclass(frozen=True)
class Calls:
    """The model called tools; ``cut`` is the call cut off by ``max_tokens``, not to be run."""

    calls: tuple[ToolUseBlock, ...]
    cut: ToolUseBlock | None = None


@dataclass(frozen=True)
class Refused:
    """The model declined (``stop_reason: refusal``); ``details`` is its ``stop_details``."""

    details: RefusalDetails | None


@dataclass(frozen=True)
class Overflowed:
    """The context window was exceeded while the model wrote its reply."""


Settled = Finished | Calls | Refused | Overflowed


async def ask(
    model: Model,
    messages: Sequence[Message],
    *,
    max_tokens: int,
    tools: Sequence[ToolSpec] | None = None,
    system: str = SYSTEM_PROMPT,
) -> ModelReply:
    """The step's model reply, with ``pause_turn`` continued and ``max_tokens`` retried once.

    ``tools``: the session's tools (default: the built-in ones, ``tool_specs()``);
    ``system``: the session's system prompt (``prompt.system_prompt``), the same bytes on
    every call so the cached prefix holds.

    The returned reply's ``content`` is the whole turn (a paused turn and its
    continuation, in order), its ``usage`` and ``attempts`` summed over the calls made.

    Raises:
        ModelError: a call failed (``ModelContextOverflow`` when the prompt does not fit).
    """
    offered = tool_specs() if tools is None else tools
    reply = await _complete(model, system, messages, max_tokens, offered)
    spec = MODELS.get(reply.model)
    ceiling = spec.max_output_tokens if spec is not None else max_tokens
    if reply.stop_reason == "max_tokens" and max_tokens < ceiling:
        retry = await _complete(model, system, messages, min(2 * max_tokens, ceiling), offered)
        reply = _summed(retry, reply, retry.content)
    pauses = 0
    while reply.stop_reason == "pause_turn" and pauses < MAX_PAUSES:
        pauses += 1
        paused = Message("assistant", reply.content)
        more = await _complete(model, system, appended(messages, paused), max_tokens, offered)
        reply = _summed(more, reply, (*reply.content, *more.content))
    return reply


def settle(reply: ModelReply) -> Settled:
    """What the step does with ``reply``, by its ``stop_reason`` (see the module table)."""
    calls = tuple(b for b in reply.content if isinstance(b, ToolUseBlock))
    text = "".join(b.text for b in reply.content if isinstance(b, TextBlock))
    match reply.stop_reason:
        case "tool_use":
            return Calls(calls)
        case "max_tokens" if reply.content and isinstance(reply.content[-1], ToolUseBlock):
            return Calls(calls, cut=reply.content[-1])
        case "max_tokens":
            return Finished(
                f"{text.rstrip()}\n\n{CUT_TEXT_NOTE}" if text.strip() else CUT_TEXT_NOTE
            )
        case "refusal":
            return Refused(reply.refusal)
        case "model_context_window_exceeded":
            return Overflowed()
        case _:  # end_turn, stop_sequence, a pause that did not resume, a future reason
            return Calls(calls) if calls else Finished(text)


def refusal_text(details: RefusalDetails | None) -> str:
    """The thread's message when the model declines, in plain words."""
    why = f" ({details.category.replace('_', ' ')})" if details and details.category else ""
    parts = [f"The model declined to continue with this request{why}."]
    if details and details.explanation:
        parts.append(details.explanation.strip())
    parts.append(
        "Nothing from that reply was kept. You can rephrase the request in this thread, "
        "or start a new one."
    )
    return " ".join(parts)


async def _complete(
    model: Model,
    system: str,
    messages: Sequence[Message],
    max_tokens: int,
    tools: Sequence[ToolSpec],
) -> ModelReply:
    return await model.complete(
        system=system, tools=tools, messages=messages, max_tokens=max_tokens
    )


def _summed(last: ModelReply, before: ModelReply, content: Sequence[object]) -> ModelReply:
    return replace(
        last,
        content=tuple(content),  # type: ignore[arg-type]
        usage=before.usage + last.usage,
        attempts=before.attempts + last.attempts,
    )
