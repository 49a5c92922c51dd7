"""The postmortem draft through the real driver (PostgreSQL, the fake Messages API): a
session asked ``postmortem_request()`` reads ``/incident/timeline.md`` and writes
``/incident/postmortem.md`` whose every claim cites timeline entries that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from harness import EntryKind, IncidentRecord, citations
from memory_store import IncidentLog, Namespace, Scope
from tests.bot.durable.cost_support import close_metered, open_metered

pytestmark = pytest.mark.postgres
ENTRY = re.compile(r"^- \*\*(T\d+)\*\* (\S+) · .*? · (\w+): (.*?)(?: \[↗\]\(.*\))?$", re.M)


def _draft_from(timeline_text: str) -> str:
    """A draft citing what the timeline the session read lists (the scripted model's)."""
    entries = {kind: (n, at, text) for n, at, kind, text in reversed(ENTRY.findall(timeline_text))}
    msg, cmd, wrote = entries["message"], entries["command"], entries["file"]
    return "\n".join(
        [
            "# Postmortem: checkout-api 500s",
            "## Summary",
            f"checkout-api returned 500s; the pool was too small [{cmd[0]}].",
            "## Impact",
            f"Reported by the on-call engineer [{msg[0]}].",
            "Customer impact: (not in the record)",
            "## Timeline",
            f"- {msg[1]} UTC: the incident was reported [{msg[0]}]",
            f"- {cmd[1]} UTC: the pool size was read [{cmd[0]}]",
            "## Root cause",
            f"pool_size was lowered to 5 [{cmd[0]}, {wrote[0]}].",
            "## Resolution",
            f"Findings recorded for the next shift [{wrote[0]}].",
            "## Action items",
            f"- Alert on pool saturation, which would have caught it [{cmd[0]}].",
        ]
    )


def policy(request: RecordedRequest) -> Reply:
    first, last = json.dumps(request.messages[0]), json.dumps(request.messages[-1])
    if "Draft the postmortem" in first:
        if "# Incident timeline" in last:
            body = json.loads(last)["content"]
            text = next(b["content"] for b in body if b.get("type") == "tool_result")
            plain = "\n".join(line.split("\t", 1)[-1] for line in text.splitlines())
            draft = _draft_from(plain)
            return Reply.tool("Write", {"file_path": "/incident/postmortem.md", "content": draft})
        if "successfully" in last:
            return Reply.text("The draft is in /incident/postmortem.md.")
        return Reply.tool("Read", {"file_path": "/incident/timeline.md"})
    if "tool_result" not in last:
        return Reply.tool("Bash", {"command": "echo pool_size=5", "description": "Pool size"})
    if "pool_size=5" in last:
        notes = {"file_path": "/incident/findings.md", "content": "pool_size is 5 since 14:02\n"}
        return Reply.tool("Write", notes)
    return Reply.text("The pool is too small since the 14:02 deploy.")


async def test_the_postmortem_draft_cites_timeline_entries_that_exist(
    postgres_url: str, tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(policy) as fake:
        metered = await open_metered(postgres_url, fake.base_url, tmp_path)
        try:
            record = IncidentRecord(IncidentLog(metered.db), "https://acme.slack.com/")
            driver = metered.driver(record=record)
            # Given an incident thread: a report, a command, notes written, an answer
            await metered.open("1796100000.000100", "checkout-api 500s", "1796100000.000100")
            await metered.run_until_idle(driver, "1796100000.000100")
            # When someone asks for the postmortem in a new thread (`@warroom postmortem`)
            await metered.open("1796100900.000100", "postmortem", "1796100900.000100")
            await metered.run_until_idle(driver, "1796100900.000100")
            # Then the draft is a file of the incident's notes
            notes = Namespace(metered.org, Scope.INCIDENT, metered.channel)
            draft = (await metered.files.read(notes, "/postmortem.md")).content
            timeline = await record.timeline(metered.org, metered.channel)
        finally:
            await close_metered(metered)
    # in the standard shape, every claim citing entries the timeline holds
    found = citations(draft, timeline)
    assert found.sound, found
    kinds = {timeline.get(c).kind.value for c in found.cited}  # type: ignore[union-attr]
    assert kinds == {"message", "command", "file"}
    # and the record shows the request as the person typed it
    asked = [e.summary for e in timeline.entries if e.kind is EntryKind.MESSAGE]
    assert asked == ["checkout-api 500s", "postmortem"]
    # and the session answered in its thread
    assert metered.answers.posted["1796100900.000100"][0].startswith(
        "The draft is in /incident/postmortem.md."
    )


def test_a_draft_citing_an_entry_that_does_not_exist_is_not_sound() -> None:
    from harness import Timeline

    empty = Timeline("T1", "C1", None, (), 0)
    draft = "## Summary\nIt broke [T9].\n## Impact\nnone"
    found = citations(draft, empty)
    assert found.missing == {"T9"}
    assert found.uncited == ("none",)
    assert not found.sound
