"""Slack rendering: pure functions from what Warroom says to Block Kit messages.

Slack's limits, respected everywhere here (Slack Block Kit reference and observed
answers of ``chat.postMessage``):

- a ``markdown`` block holds ≤ 12,000 chars, and the ``markdown`` text of one message
  is limited to 12,000 chars *in total* (above it Slack answers ``msg_blocks_too_long``;
  bolt-js issue #2509 measured the cut just above 12,000), so one message carries at
  most one full ``markdown`` block;
- a ``section`` text holds ≤ 3,000 chars (``invalid_blocks``, "must be less than 3001
  characters");
- a message holds ≤ 50 blocks (``invalid_blocks``, "no more than 50 items allowed");
- a message's top-level ``text`` is cut by Slack at 40,000 chars (``msg_too_long``).

Nothing here does I/O; ``bot.slack.poster`` sends what these functions build.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from harness import AgentRecord, ScheduledWakeup, TaskRecord, Todo, TodoStatus

MAX_MARKDOWN_CHARS = 12_000
MAX_SECTION_CHARS = 3_000
MAX_BLOCKS = 50
MAX_FALLBACK_CHARS = 150
DEFAULT_MAX_ANSWER_MESSAGES = 4
PREVIEW_CHARS = 1_500
STOP_ACTION_ID = "warroom_stop"
MAX_REASON_CHARS = 600
THINKING_STATUS = "is thinking…"

Block = dict[str, Any]


@dataclass(frozen=True)
class SlackMessage:
    """One Slack message: Block Kit ``blocks`` plus the ``text`` fallback.

    ``text`` is what notifications and screen readers show (Slack recommends it
    whenever ``blocks`` are sent); it is kept short (≤ 150 chars).
    """

    text: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class InlineAnswer:
    """An answer that fits in ``messages`` (1 … max_messages), to be posted in order."""

    messages: tuple[SlackMessage, ...]


@dataclass(frozen=True)
class FileAnswer:
    """An answer too long for the thread: post ``preview``, upload ``content`` as a file."""

    preview: SlackMessage
    content: str
    filename: str = "answer.md"


RenderedAnswer = InlineAnswer | FileAnswer


@dataclass(frozen=True)
class Progress:
    """What one turn's status message shows.

    ``step`` is the current step in Slack mrkdwn (e.g. "Running `kubectl get pods`"),
    ``elapsed_s`` the seconds since the turn started; ``finished`` drops the Stop button;
    ``spend`` is the session's tokens and cost so far (``'43,500 tokens · $0.018'``);
    ``long_work`` the work that goes on between steps, one line each (background
    commands with their elapsed time, the next scheduled check: ``long_work_lines``);
    ``failed`` (with ``finished``): the turn ended because the session failed.
    """

    session_id: str
    step: str | None
    todos: tuple[Todo, ...] = ()
    elapsed_s: float = 0.0
    finished: bool = False
    spend: str | None = None
    long_work: tuple[str, ...] = ()
    failed: bool = False


_TODO_MARKS = {TodoStatus.PENDING: "☐", TodoStatus.IN_PROGRESS: "◐", TodoStatus.COMPLETED: "☑"}


# ----- answers ---------------------------------------------------------------------


def render_answer(
    markdown: str, *, max_messages: int = DEFAULT_MAX_ANSWER_MESSAGES
) -> RenderedAnswer:
    """The model's Markdown answer as thread messages, or as a file when too long.

    Each message carries one ``markdown`` block of ≤ 12,000 chars (Slack's per-message
    markdown limit). Text is split at paragraph boundaries, then line boundaries, and
    inside a fenced code block only when the block alone is too long (the fence is
    then closed and reopened). More than ``max_messages`` parts → ``FileAnswer``.
    """
    chunks = split_markdown(markdown, MAX_MARKDOWN_CHARS)
    if len(chunks) > max_messages:
        return FileAnswer(preview=_file_preview(markdown), content=markdown)
    total = len(chunks)
    return InlineAnswer(
        tuple(
            markdown_message(chunk, part=i + 1 if total > 1 else None, parts=total)
            for i, chunk in enumerate(chunks)
        )
    )


def markdown_message(markdown: str, *, part: int | None = None, parts: int = 1) -> SlackMessage:
    """One message holding ``markdown`` (≤ 12,000 chars) in Slack's ``markdown`` block.

    Raises:
        ValueError: ``markdown`` is longer than 12,000 chars.
    """
    if len(markdown) > MAX_MARKDOWN_CHARS:
        raise ValueError(f"markdown block of {len(markdown)} chars > {MAX_MARKDOWN_CHARS}")
    suffix = f" ({part}/{parts})" if part is not None else ""
    fallback = _fallback(markdown, MAX_FALLBACK_CHARS - len(suffix)) + suffix
    return SlackMessage(text=fallback, blocks=({"type": "markdown", "text": markdown},))


def _file_preview(markdown: str) -> SlackMessage:
    head = split_markdown(markdown, PREVIEW_CHARS)[0]
    note = f"_The full answer ({len(markdown):,} characters) is attached below as a file._"
    return markdown_message(f"{head}\n\n…\n\n{note}")


# Slack's own markup (mentions ``<@U…>``, channels ``<#C…|name>``, ``<!here>``, links
# ``<url|label>``) is kept whole in the fallback: only Markdown emphasis around it goes.
_SLACK_ENTITY = re.compile(r"(<(?:[@#!]|https?:|mailto:)[^<>\n]*>)")
_MARKDOWN_LINK = re.compile(r"\[([^\[\]\n]+)\]\((https?://[^()\s<>|]+)\)")
_EMPHASIS = re.compile(r"[*~]+|(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINE_MARKER = re.compile(r"^\s*(?:>\s*|#{1,6}\s+|[-*+]\s+)*")


def _fallback(markdown: str, max_chars: int) -> str:
    for line in markdown.splitlines():
        if _fence_of(line) is not None:
            continue
        words = _plain_line(mrkdwn_links(line))
        if words:
            return _cut_outside_entities(words, max_chars)
    return "Answer"


def mrkdwn_links(text: str) -> str:
    """Markdown links (``[label](https://…)``, what the ``markdown`` block renders) as
    Slack mrkdwn links (``<https://…|label>``, what a message's ``text`` renders).

    >>> mrkdwn_links("Reported [[T1](https://acme.slack.com/archives/C1/p1)].")
    'Reported [<https://acme.slack.com/archives/C1/p1|T1>].'
    """
    return _MARKDOWN_LINK.sub(lambda m: f"<{m.group(2)}|{m.group(1)}>", text)


def _plain_line(line: str) -> str:
    """One Markdown line as notification text: quote/heading/bullet markers and
    emphasis removed, Slack entities (``<@U1>``, ``<url|label>``) untouched.

    An underscore inside a word (``pool_size``) is not emphasis (CommonMark's rule) and
    a code span's text is kept as written (notifications show this text).

    >>> _plain_line("> **Paged** <@U0ALICE> about <https://x.io/a_b|the *graph*>")
    'Paged <@U0ALICE> about <https://x.io/a_b|the *graph*>'
    >>> _plain_line("_Raise_ `pool_size` and DB_POOL_MAX to *20*, see `__init__`")
    'Raise pool_size and DB_POOL_MAX to 20 , see __init__'
    """
    parts = _SLACK_ENTITY.split(_LINE_MARKER.sub("", line))
    plain = [part if i % 2 else _plain_words(part) for i, part in enumerate(parts)]
    return " ".join("".join(plain).split())


def _plain_words(text: str) -> str:
    """``text`` without emphasis marks, its code spans' contents kept as written."""
    pieces = _CODE_SPAN.split(text)  # [outside, ticks, code, outside, ticks, code, …]
    out = []
    for i, piece in enumerate(pieces):
        if i % 3 == 0:
            out.append(_EMPHASIS.sub(" ", piece.replace("`", " ")))
        elif i % 3 == 2:
            out.append(piece)
    return "".join(out)


def _cut_outside_entities(text: str, max_chars: int) -> str:
    """``truncate``, but never inside a Slack entity (it is dropped whole instead)."""
    if len(text) <= max_chars:
        return text
    cut = max_chars - 1
    for match in _SLACK_ENTITY.finditer(text):
        if match.start() < cut < match.end():
            cut = match.start()
    return text[:cut].rstrip() + "…"


# ----- splitting -------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """A paragraph, or a fenced code block (``fence`` is its opening line)."""

    text: str
    fence: str | None = None


def split_markdown(markdown: str, max_chars: int) -> list[str]:
    """Cut Markdown into chunks of ≤ ``max_chars`` chars, at the gentlest boundary.

    Paragraphs and fenced code blocks stay whole when they fit; chunks are joined
    back with a blank line. An empty input gives one empty chunk.

    >>> split_markdown("one\\n\\ntwo", 5)
    ['one', 'two']
    >>> split_markdown("```\\na\\nb\\n```", 9)
    ['```\\na\\n```', '```\\nb\\n```']
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    pieces = [piece for unit in _units(markdown) for piece in _pieces(unit, max_chars)]
    return _pack(pieces, max_chars) or [""]


def _units(markdown: str) -> list[_Unit]:
    units: list[_Unit] = []
    paragraph: list[str] = []
    lines = iter(markdown.split("\n"))
    for line in lines:
        fence = _fence_of(line)
        if fence is None and line.strip():
            paragraph.append(line)
            continue
        if paragraph:
            units.append(_Unit("\n".join(paragraph)))
            paragraph = []
        if fence is not None:
            units.append(_fenced_unit(line, fence, lines))
    if paragraph:
        units.append(_Unit("\n".join(paragraph)))
    return units


def _fence_of(line: str) -> str | None:
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return None
    for char in "`~":
        if stripped.startswith(char * 3):
            return char * (len(stripped) - len(stripped.lstrip(char)))
    return None


def _fenced_unit(opening: str, fence: str, lines: Any) -> _Unit:
    body = [opening]
    for line in lines:
        body.append(line)
        stripped = line.strip()
        if stripped.startswith(fence) and not stripped.strip(fence[0]):
            break
    return _Unit("\n".join(body), fence=opening)


def _pieces(unit: _Unit, max_chars: int) -> list[str]:
    if len(unit.text) <= max_chars:
        return [unit.text]
    if unit.fence is None:
        return _group_lines(unit.text.split("\n"), max_chars)
    return _split_fence(unit, max_chars)


def _split_fence(unit: _Unit, max_chars: int) -> list[str]:
    opening = unit.fence or "```"
    closing = _fence_of(opening) or "```"
    lines = unit.text.split("\n")[1:]
    if lines and lines[-1].strip() == closing:
        lines = lines[:-1]
    room = max_chars - len(opening) - len(closing) - 2
    if room < 1:
        return _group_lines(unit.text.split("\n"), max_chars)
    return [f"{opening}\n{body}\n{closing}" for body in _group_lines(lines, room)]


def _group_lines(lines: Sequence[str], max_chars: int) -> list[str]:
    cut = [part for line in lines for part in _cut_line(line, max_chars)]
    return _pack(cut, max_chars, separator="\n")


def _cut_line(line: str, max_chars: int) -> list[str]:
    parts = []
    while len(line) > max_chars:
        at = line.rfind(" ", max_chars // 2, max_chars)
        at = at if at > 0 else max_chars
        parts.append(line[:at])
        line = line[at:]
    parts.append(line)
    return parts


def _pack(pieces: Sequence[str], max_chars: int, separator: str = "\n\n") -> list[str]:
    chunks: list[str] = []
    current: str | None = None
    for piece in pieces:
        if current is not None and len(current) + len(separator) + len(piece) <= max_chars:
            current = f"{current}{separator}{piece}"
            continue
        if current is not None:
            chunks.append(current)
        current = piece
    if current is not None:
        chunks.append(current)
    return chunks


# ----- text helpers ----------------------------------------------------------------


def escape_mrkdwn(text: str) -> str:
    """Escape ``&``, ``<``, ``>`` for Slack mrkdwn (Slack: "Escaping text").

    >>> escape_mrkdwn("a < b & c")
    'a &lt; b &amp; c'
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def truncate(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` chars, ending with "…" when cut.

    >>> truncate("abcdef", 4)
    'abc…'
    """
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def format_elapsed(seconds: float) -> str:
    """Elapsed time the way the status line shows it.

    >>> format_elapsed(72.4), format_elapsed(5), format_elapsed(3725)
    ('1m 12s', '5s', '1h 2m 5s')
    """
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m {secs}s"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def section(mrkdwn: str) -> Block:
    """A ``section`` block with mrkdwn text, cut to Slack's 3,000 chars."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(mrkdwn, 3_000)}}


def sections_from_lines(
    lines: Sequence[str], *, max_blocks: int = MAX_BLOCKS, more: str = "…and {n} more"
) -> list[Block]:
    """Lines packed into ``section`` blocks of ≤ 3,000 chars, at most ``max_blocks`` blocks.

    Lines that do not fit are dropped and counted in a last line built from ``more``
    (``{n}`` = how many were dropped).
    """
    chunks = _pack([truncate(line, MAX_SECTION_CHARS) for line in lines], MAX_SECTION_CHARS, "\n")
    if len(chunks) <= max_blocks:
        return [section(chunk) for chunk in chunks]
    kept = chunks[: max_blocks - 1]
    shown = sum(chunk.count("\n") + 1 for chunk in kept)
    return [section(chunk) for chunk in kept] + [section(more.format(n=len(lines) - shown))]


# ----- the status message ----------------------------------------------------------

MAX_STEP_CHARS = 500
MAX_TODO_CHARS = 300


def render_status(progress: Progress) -> SlackMessage:
    """The one status message of a turn: current step, todo list, elapsed time, Stop.

    Blocks: a section with the step and the elapsed time, the todo list (☐ pending,
    ◐ in progress, ☑ completed) packed into sections of ≤ 3,000 chars, and an actions
    block with a Stop button (``action_id`` ``warroom_stop``, value = session id) while
    the turn runs. Never more than 50 blocks, whatever the list's length.
    """
    elapsed = format_elapsed(progress.elapsed_s)
    head = _status_head(progress, elapsed)
    blocks = [section(head)]
    room = MAX_BLOCKS - 1 - (0 if progress.finished else 1)
    if progress.long_work:
        blocks.append(
            section("\n".join(truncate(x, MAX_TODO_CHARS) for x in progress.long_work[:20]))
        )
        room -= 1
    lines = [_todo_line(t, finished=progress.finished) for t in progress.todos]
    blocks.extend(sections_from_lines(lines, max_blocks=room))
    if not progress.finished:
        blocks.append(stop_button(progress.session_id))
    done = "Failed" if progress.failed else "Done"
    step = progress.step or (done if progress.finished else "Working")
    return SlackMessage(
        text=truncate(f"{step} ({elapsed})", MAX_FALLBACK_CHARS), blocks=tuple(blocks)
    )


def _status_head(progress: Progress, elapsed: str) -> str:
    icon = ":white_check_mark:" if progress.finished else ":hourglass_flowing_sand:"
    state = "Finished" if progress.finished else "Working"
    if progress.finished and progress.failed:
        icon, state = ":x:", "Failed"
    head = f"{icon} *{state}* · {elapsed}"
    if progress.spend:
        head += f" · {progress.spend}"
    if progress.step:
        head += "\n" + escape_mrkdwn(truncate(progress.step, MAX_STEP_CHARS))
    return head


_KIND_LABELS = {"bash": ":gear: Background", "monitor": ":eyes: Monitor"}


def long_work_lines(
    tasks: Sequence[TaskRecord],
    wakeup: ScheduledWakeup | None,
    *,
    now_s: float,
    agents: Sequence[AgentRecord] = (),
) -> tuple[str, ...]:
    """The status message's lines for work going on between steps: each running
    subagent, background command and monitor with its elapsed time, then the next
    scheduled check (UTC).

    >>> t = TaskRecord("b1", "toolu_1", "bash", "Wait for the rollout", 1000.0)
    >>> w = ScheduledWakeup(1_764_685_920.0, "error rate", "check it")
    >>> a = AgentRecord("toolu_2", "s-child", "Check the pods", False, 1060.0)
    >>> for line in long_work_lines([t], w, now_s=1072.0, agents=[a]):
    ...     print(line)
    :robot_face: Subagent: Check the pods · running 12s
    :gear: Background: Wait for the rollout · running 1m 12s
    :alarm_clock: Next check at 14:32 UTC · error rate
    """
    lines = [
        f":robot_face: Subagent: {escape_mrkdwn(a.description)} · running "
        f"{format_elapsed(now_s - a.started_at)}"
        for a in agents
        if a.running
    ]
    lines += [
        f"{_KIND_LABELS.get(t.kind, ':gear: Background')}: {escape_mrkdwn(t.description)} · "
        f"running {format_elapsed(now_s - t.started_at)}"
        for t in tasks
        if t.running
    ]
    if wakeup is not None:
        at = datetime.fromtimestamp(wakeup.due_at, UTC).strftime("%H:%M")
        line = f":alarm_clock: Next check at {at} UTC"
        lines.append(line + (f" · {escape_mrkdwn(wakeup.reason)}" if wakeup.reason else ""))
    return tuple(lines)


def _todo_line(todo: Todo, *, finished: bool = False) -> str:
    """One todo: ☐ pending, ◐ in progress (its active form, bold), ☑ completed (struck).
    Once the turn is finished nothing is in progress: such a todo shows as not done."""
    status = todo.status
    if finished and status is TodoStatus.IN_PROGRESS:
        status = TodoStatus.PENDING
    mark = _TODO_MARKS[status]
    words = (
        todo.active_form if status is TodoStatus.IN_PROGRESS and todo.active_form else todo.content
    )
    words = escape_mrkdwn(truncate(" ".join(words.split()), MAX_TODO_CHARS))
    if status is TodoStatus.IN_PROGRESS:
        return f"{mark} *{words}*"
    return f"{mark} ~{words}~" if status is TodoStatus.COMPLETED else f"{mark} {words}"


def stop_button(session_id: str) -> Block:
    """The actions block with the Stop button (``warroom_stop``, value = session id)."""
    return {
        "type": "actions",
        "block_id": "warroom_controls",
        "elements": [
            {
                "type": "button",
                "action_id": STOP_ACTION_ID,
                "text": {"type": "plain_text", "text": "Stop"},
                "style": "danger",
                "value": session_id,
            }
        ],
    }


# ----- failures, in plain words ----------------------------------------------------


def notice(text: str) -> SlackMessage:
    """A one-section message in plain words (mrkdwn), cut to Slack's 3,000 chars."""
    return SlackMessage(
        text=truncate(text.split("\n")[0], MAX_FALLBACK_CHARS), blocks=(section(text),)
    )


def render_model_unavailable(*, attempts: int, reason: str | None = None) -> SlackMessage:
    """The model API kept failing (overloaded, down, or unreachable) after retries."""
    why = f" (last error: {escape_mrkdwn(truncate(reason, 300))})" if reason else ""
    return notice(
        f":warning: I can't reach the AI model right now: {attempts} attempts failed{why}. "
        "I've paused this investigation. Reply in this thread and I'll pick it up again "
        "from where I stopped."
    )


def render_sandbox_replaced(
    *, lost_processes: Sequence[str], lost_files: Sequence[str]
) -> SlackMessage:
    """The session's sandbox was gone and a fresh one replaced it; say what was lost."""
    lines = [
        ":recycle: My sandbox (the machine I run commands on) was gone, so I started a new one."
    ]
    if lost_processes:
        lines.append("These commands were still running and were lost: " + _listing(lost_processes))
    if lost_files:
        lines.append("These files were not re-created: " + _listing(lost_files))
    if not lost_processes and not lost_files:
        lines.append("Nothing running was lost.")
    lines.append("Shared notes, memory and skills are safe: they live in the database.")
    return notice("\n".join(lines))


def render_step_cap(*, steps: int) -> SlackMessage:
    """The turn hit its step limit before the model finished."""
    return notice(
        f":octagonal_sign: I stopped after {steps} steps, the most one turn may take. "
        "What I found so far is in this thread and in the incident notes. "
        "Reply to let me continue, or narrow the question."
    )


def render_session_failed(*, crashes: int, reason: str | None = None) -> SlackMessage:
    """The session's step crashed its worker ``crashes`` times; it was given up. ``reason``:
    what its last attempt met, when it said (a worker that died says nothing).

    >>> render_session_failed(crashes=3, reason="ModelUnavailable: 529").text[:80]
    ':x: This investigation failed: its next step crashed 3 times in a row (the last '
    """
    last = f" (the last time: {truncate(reason, MAX_REASON_CHARS)})" if reason else ""
    return notice(
        f":x: This investigation failed: its next step crashed {crashes} times in a row{last}, "
        "so I've stopped it rather than keep retrying. Nothing else will run. "
        "Reply in this thread to try again, or start a new thread."
    )


def render_stopped(*, user_id: str) -> SlackMessage:
    """Someone pressed Stop (or wrote ``stop``)."""
    return notice(f":black_square_for_stop: Stopped by <@{user_id}>. Reply to continue.")


def _listing(items: Sequence[str], max_items: int = 10) -> str:
    shown = ", ".join(f"`{escape_mrkdwn(truncate(item, 200))}`" for item in items[:max_items])
    extra = len(items) - max_items
    return shown + (f" and {extra} more" if extra > 0 else "")
