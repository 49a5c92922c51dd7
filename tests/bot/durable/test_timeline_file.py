"""``/incident/timeline.md`` through the real driver: generated from the event log on each
Read, refused to Write (PostgreSQL, the fake Messages API)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI, Reply
from harness import IncidentRecord
from memory_store import IncidentLog
from tests.bot.durable.cost_support import close_metered, open_metered

pytestmark = pytest.mark.postgres
URL = "https://acme.slack.com/"
TIMELINE = "/incident/timeline.md"


async def test_the_timeline_file_is_generated_on_read_and_read_only(
    postgres_url: str, tmp_path: Path
) -> None:
    # Given a session that reads the timeline, then tries to overwrite it
    script = [
        Reply.tool("Bash", {"command": "true", "description": "Nothing"}),
        Reply.tool("Read", {"file_path": TIMELINE}),
        Reply.tool("Write", {"file_path": TIMELINE, "content": "all fine"}),
        Reply.text("Done."),
    ]
    async with FakeAnthropicAPI(script) as fake:
        metered = await open_metered(postgres_url, fake.base_url, tmp_path)
        try:
            record = IncidentRecord(IncidentLog(metered.db), URL)
            driver = metered.driver(record=record)
            root = "1796200000.000100"
            await metered.open(root, text="checkout-api 500s since 14:02", source_ts=root)
            # When it runs
            await metered.run_until_idle(driver, "1796200000.000100")
        finally:
            await close_metered(metered)
    # Then Read gave the timeline as it stood: the message and the command before it
    read_result = _last_tool_result(fake.requests[2].body)
    assert read_result.startswith("1\t# Incident timeline: <#C0COST> (UTC)")
    link = f"{URL}archives/C0COST/p1796200000000100"
    assert f"<@U1> · message: checkout-api 500s since 14:02 [↗]({link})" in read_result
    assert "command: `true` → exit 0" in read_result
    # and Write was refused with a way forward
    write_result = _last_tool_result(fake.requests[3].body)
    assert "is read-only" in write_result
    assert "/incident/postmortem.md" in write_result


async def test_the_timeline_file_is_listed_and_found_like_any_incident_file(
    postgres_url: str, tmp_path: Path
) -> None:
    # Given a session that lists /incident, then globs it for Markdown
    script = [
        Reply.tool("Read", {"file_path": "/incident"}),
        Reply.tool("Glob", {"pattern": "**/*.md", "path": "/incident"}),
        Reply.tool("Glob", {"pattern": "/incident/*.txt"}),
        Reply.text("Done."),
    ]
    async with FakeAnthropicAPI(script) as fake:
        metered = await open_metered(postgres_url, fake.base_url, tmp_path)
        try:
            driver = metered.driver(record=IncidentRecord(IncidentLog(metered.db), URL))
            root = "1796200000.000200"
            await metered.open(root, text="is anything written down yet?", source_ts=root)
            await metered.run_until_idle(driver, root)
        finally:
            await close_metered(metered)
    # Then the listing and a matching Glob show the generated timeline, a non-matching one not
    listing = _last_tool_result(fake.requests[1].body)
    assert "/incident/ is a directory with 1 entry:" in listing
    assert "- timeline.md (generated from the event log on each read; read-only)" in listing
    assert TIMELINE in _last_tool_result(fake.requests[2].body)
    assert TIMELINE not in _last_tool_result(fake.requests[3].body)


def _last_tool_result(body: Mapping[str, Any]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    for block in reversed(messages[-1]["content"]):
        if block.get("type") == "tool_result":
            content = block["content"]
            return content if isinstance(content, str) else json.dumps(content)
    raise AssertionError("no tool result in the last message")
