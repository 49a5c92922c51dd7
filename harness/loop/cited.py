"""An answer checked against the timeline it cites, before it is posted (§15).

When the model ends its turn, every ``[T<n>]`` its answer cites, and every one the
postmortem draft it wrote cites, must be an entry of the incident's timeline. A draft
that cites entries that do not exist goes back to the model once per turn, in the same
step, with a short reminder naming them (``REMINDER``); whatever it answers then is
posted, each citation a link to its entry's Slack message and any still unknown marked
so (``harness.record.citing.linked``). The timeline is read once per check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from harness.loop.checkpoint import Checkpoint
from harness.loop.events import Answered, Event
from harness.loop.prompt import REMINDER_OPEN
from harness.model.messages import TextBlock, ToolUseBlock
from harness.model.transcript import containing
from harness.record.citing import cited, linked, unknown
from harness.record.incident import IncidentRecord
from harness.record.postmortem import POSTMORTEM_PATH
from memory_store import FileNotFound, FileStore, Namespace, Scope

REMINDER = (
    "Your answer cites {ids}, {which} not in /incident/timeline.md. Every claim must "
    "point to evidence that exists: cite only entries you read there (Read it again if you "
    "need to), or say the record does not show it. Write the answer again."
)
DRAFT_REMINDER = (
    "The draft {path} cites {ids}, {which} not in /incident/timeline.md: fix those "
    "lines (cite entries that exist, or write (not in the record)), then answer."
)
_MARK = " not in /incident/timeline.md"

Ask = Callable[[Checkpoint], Awaitable[tuple[Checkpoint, list[Event]]]]


async def checked(
    cp: Checkpoint,
    events: list[Event],
    record: IncidentRecord,
    store: FileStore,
    ask_again: Ask,
) -> tuple[Checkpoint, list[Event]]:
    """``cp`` (whose ``answer`` is set) and ``events`` of a model step, its citations
    checked: sent back once through ``ask_again`` when some point nowhere, then linked.

    Raises:
        DatabaseUnavailable: the timeline or the draft could not be read.
    """
    assert cp.answer is not None
    draft = await _draft(cp, store)
    if not cited(cp.answer) and not cited(draft):
        return cp, events
    timeline = await record.timeline(cp.org_id, cp.channel_id)
    bad, bad_in_draft = unknown(cp.answer, timeline), unknown(draft, timeline)
    if (bad or bad_in_draft) and not _sent_back(cp):
        told = [_told(REMINDER, bad)] if bad else []
        told += [_told(DRAFT_REMINDER, bad_in_draft, path=POSTMORTEM_PATH)] if bad_in_draft else []
        again = replace(cp, answer=None, best_effort=False, notices=(*cp.notices, *told))
        kept = [e for e in events if not isinstance(e, Answered)]
        cp, more = await ask_again(again)
        events = [*kept, *more]
        if cp.answer is None:  # it went to work (Read the timeline, Edit the draft)
            return cp, events
        timeline = await record.timeline(cp.org_id, cp.channel_id)
    answer = cp.answer
    assert answer is not None  # set on entry, or by the second ask (else returned above)
    return replace(cp, answer=linked(answer, timeline)), events


def _told(template: str, ids: tuple[str, ...], *, path: str = "") -> str:
    which = "which is" if len(ids) == 1 else "which are"
    return template.format(ids=", ".join(ids), which=which, path=path)


def _sent_back(cp: Checkpoint) -> bool:
    """Whether this turn's draft was already sent back (a reminder of ours since the last
    person's text)."""
    for message in reversed(cp.messages):
        if message.role != "user":
            continue
        texts = [b.text for b in message.content if isinstance(b, TextBlock)]
        if any(_MARK in t for t in texts):
            return True
        if any(not t.startswith(REMINDER_OPEN) for t in texts):
            return False
    return False


async def _draft(cp: Checkpoint, store: FileStore) -> str:
    """The postmortem draft, when this session wrote or edited it ("" otherwise).

    Only the messages whose JSON names the draft's path are read (a long transcript read
    from the store is not decoded whole: ``transcript.containing``)."""
    wrote = any(
        isinstance(b, ToolUseBlock)
        and b.name in ("Write", "Edit")
        and b.input.get("file_path") == POSTMORTEM_PATH
        for m in containing(cp.messages, POSTMORTEM_PATH)
        if m.role == "assistant"
        for b in m.content
    )
    if not wrote:
        return ""
    notes = Namespace(cp.org_id, Scope.INCIDENT, cp.channel_id)
    try:
        return (await store.read(notes, POSTMORTEM_PATH.removeprefix("/incident"))).content
    except FileNotFound:
        return ""
