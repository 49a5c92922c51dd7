"""An answer's citations through the real driver (PostgreSQL, the fake Messages API): a
draft citing entries that do not exist goes back to the model once, naming them; what is
posted links each citation to its entry's Slack message."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from harness import IncidentRecord
from memory_store import IncidentLog, Namespace, Scope
from tests.bot.durable.cost_support import Metered, close_metered, open_metered

pytestmark = pytest.mark.postgres
URL = "https://acme.slack.com/"
REMINDED = "not in /incident/timeline.md"


def _reminded(request: RecordedRequest) -> bool:
    return REMINDED in json.dumps(request.messages[-1])


def corrects_itself(request: RecordedRequest) -> Reply:
    if _reminded(request):
        return Reply.text("Reported at 14:02 [T1].")
    return Reply.text("Reported at 14:02 [T1]; the pool shrank at 13:58 [T9, T1].")


def insists(request: RecordedRequest) -> Reply:
    return Reply.text("The pool shrank at 13:58 [T9].")


def drafts_badly(request: RecordedRequest) -> Reply:
    """Write a draft citing T9, answer; told, fix the draft; answer again."""
    turn = sum(1 for m in request.messages if m.get("role") == "assistant")
    if turn == 0:
        draft = "## Summary\nThe pool shrank [T9].\n"
        return Reply.tool("Write", {"file_path": "/incident/postmortem.md", "content": draft})
    if turn == 2:
        fix = {"file_path": "/incident/postmortem.md", "old_string": "[T9]", "new_string": "[T1]"}
        return Reply.tool("Edit", fix)
    return Reply.text("The draft is in /incident/postmortem.md.")


def _root() -> str:
    """A thread ts of its own (it is also the session's id, unique in the database)."""
    digits = f"{uuid.uuid4().int % 10**16:016d}"
    return f"{digits[:10]}.{digits[10:]}"


def _link(root: str) -> str:
    return f"https://acme.slack.com/archives/C0COST/p{root.replace('.', '')}"


async def _run(metered: Metered, root: str, text: str = "checkout-api 500s") -> str:
    """The posted answer, without the usage line the poster adds."""
    driver = metered.driver(record=IncidentRecord(IncidentLog(metered.db), URL))
    await metered.open(root, text, root)
    await metered.run_until_idle(driver, root)
    (answer,) = metered.answers.posted[root]
    return answer.split("\n\n_")[0]


async def test_a_draft_citing_a_missing_entry_goes_back_once_and_the_posted_one_is_linked(
    postgres_url: str, tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(corrects_itself) as fake:
        metered = await open_metered(postgres_url, fake.base_url, tmp_path)
        try:
            # When the model's answer cites T9, which the incident's timeline lacks
            root = _root()
            answer = await _run(metered, root)
        finally:
            await close_metered(metered)
    # Then it is asked once more, told which entries do not exist
    first, second = fake.requests
    assert not _reminded(first)
    reminder = json.dumps(second.messages[-1])
    assert "Your answer cites T9, which is not in /incident/timeline.md" in reminder
    # and what is posted is its second answer, the citation a link to the entry's message
    assert answer == f"Reported at 14:02 [[T1]({_link(root)})]."


async def test_a_model_that_cites_a_missing_entry_again_is_posted_with_it_marked(
    postgres_url: str, tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(insists) as fake:
        metered = await open_metered(postgres_url, fake.base_url, tmp_path)
        try:
            answer = await _run(metered, _root())
        finally:
            await close_metered(metered)
    # Sent back once only: the second answer is posted, its unknown citation marked
    assert len(fake.requests) == 2
    assert answer == "The pool shrank at 13:58 [T9 (no such entry)]."


async def test_a_postmortem_draft_citing_a_missing_entry_goes_back_before_the_answer(
    postgres_url: str, tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(drafts_badly) as fake:
        metered = await open_metered(postgres_url, fake.base_url, tmp_path)
        try:
            answer = await _run(metered, _root(), "postmortem")
            notes = Namespace(metered.org, Scope.INCIDENT, metered.channel)
            draft = (await metered.files.read(notes, "/postmortem.md")).content
        finally:
            await close_metered(metered)
    # The answer after the first draft was not posted: the model was told what to fix
    reminder = json.dumps(fake.requests[2].messages[-1])
    assert "The draft /incident/postmortem.md cites T9, which is not in" in reminder
    assert draft == "## Summary\nThe pool shrank [T1].\n"
    assert answer == "The draft is in /incident/postmortem.md."
    assert len(fake.requests) == 4
