"""``warroom export-incident``: the timeline, the notes and the postmortem of a channel as
Markdown and JSON, through the real command line on the configured (SQLite) database."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.app import app
from memory_store import Database, FileStore, Namespace, Origin, Scope, SessionKey, SessionStore
from tests.bot.cli_support import warroom_env

ORG, CHANNEL, ROOT = "T0EXPORT", "C0INC", "1796100000.000100"
DRAFT = """# Postmortem
## Summary
checkout-api returned 500s [T1].
## Impact
Customers: (not in the record)
## Timeline
- reported [T1]
## Root cause
The pool shrank [T1].
## Resolution
Rolled back [T1].
## Action items
- Alert on pool saturation [T1].
"""


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A clean configuration: no Warroom variable set, data under tmp_path, no .env."""
    for name in warroom_env(tmp_path).keys() ^ os.environ.keys():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WARROOM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


async def _incident(data_dir: Path) -> None:
    db = Database.from_url(None, data_dir=data_dir)
    try:
        await db.migrate()
        await SessionStore(db).open_or_join(
            SessionKey(ORG, CHANNEL, ROOT),
            requester_id="U0ALICE",
            initial_checkpoint="{}",
            text="checkout-api 500s since 14:02",
            source_ts=ROOT,
        )
        notes, files = Namespace(ORG, Scope.INCIDENT, CHANNEL), FileStore(db)
        await files.write(
            notes, "/findings.md", "pool_size 5\n", Origin("U0ALICE"), expected_version=0
        )
        await files.write(notes, "/postmortem.md", DRAFT, Origin("agent"), expected_version=0)
    finally:
        await db.dispose()


def test_export_incident_writes_the_timeline_notes_and_postmortem(home: Path) -> None:
    # Given an incident channel with a message, notes and a postmortem draft
    asyncio.run(_incident(home / "data"))
    # When its record is exported
    result = CliRunner().invoke(
        app, ["export-incident", CHANNEL, "--out", str(home / "out"), "--org", ORG]
    )
    # Then the command says what it wrote
    assert result.exit_code == 0, result.output
    assert "1 timeline entries, 2 note file(s), a postmortem" in result.output
    folder = home / "out" / CHANNEL
    # the timeline as Markdown and JSON
    assert "**T1**" in (folder / "timeline.md").read_text()
    timeline = json.loads((folder / "timeline.json").read_text())
    assert [e["kind"] for e in timeline["entries"]] == ["message"]
    assert timeline["entries"][0]["actor"] == {"kind": "human", "id": "U0ALICE"}
    # the notes as they stand, postmortem included
    assert (folder / "notes" / "findings.md").read_text() == "pool_size 5\n"
    assert (folder / "notes" / "postmortem.md").read_text() == DRAFT
    # and the postmortem with its citations checked, all in one document too
    postmortem = json.loads((folder / "postmortem.json").read_text())
    assert postmortem["sound"] is True
    assert postmortem["cited"] == ["T1"]
    bundle = json.loads((folder / "incident.json").read_text())
    assert bundle["channel_id"] == CHANNEL
    assert [n["path"] for n in bundle["notes"]] == [
        "/incident/findings.md",
        "/incident/postmortem.md",
    ]


def test_export_of_a_channel_with_nothing_recorded_exits_1_and_writes_nothing(home: Path) -> None:
    # Given an incident in one channel
    asyncio.run(_incident(home / "data"))
    # When another channel, or the right one in another org, is exported
    other = CliRunner().invoke(app, ["export-incident", "C0UNKNOWN", "--out", str(home / "out")])
    wrong_org = CliRunner().invoke(
        app, ["export-incident", CHANNEL, "--out", str(home / "out"), "--org", "T0ELSE"]
    )
    # Then each says nothing is recorded there, exits 1, and writes no empty files
    assert other.exit_code == 1, other.output
    assert "nothing is recorded in C0UNKNOWN" in other.output
    assert wrong_org.exit_code == 1, wrong_org.output
    assert "of org T0ELSE" in wrong_org.output
    assert not (home / "out").exists()
