"""Timeline entries from an incident's rows (pure): what each row becomes, how it links."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from harness import (
    Answered,
    EntryKind,
    Event,
    Notice,
    NoticeTopic,
    ToolFinished,
    ToolUnknown,
    build_timeline,
    timeline_json,
    timeline_markdown,
)
from memory_store import IncidentRow, IncidentRows, IncidentSession

T0 = datetime(2026, 12, 1, 14, 2, tzinfo=UTC)
URL = "https://acme.slack.com/"
ROOT = "1796100000.000100"
SESSION = IncidentSession("s1", ROOT, "U0ALICE", T0)


def _at(n: int) -> datetime:
    return T0 + timedelta(seconds=n)


def _event(n: int, event: Event) -> IncidentRow:
    return IncidentRow("event", _at(n), "s1", n, event.kind, event.to_json(), None, None)


def _rows() -> IncidentRows:
    finished = ToolFinished(
        "toolu_1",
        "Bash",
        "Bash: Count",
        True,
        20,
        "Exit code 2\nno such file",
        "grep -c 500 app.log",
    )
    mcp = ToolFinished(
        "toolu_2", "mcp__grafana__query", "mcp__grafana__query", False, 10, "ok", '{"expr": "up"}'
    )
    read = ToolFinished("toolu_3", "Read", "Read /workspace/a", False, 10, "x", "/workspace/a")
    write = ToolFinished(
        "toolu_4", "Write", "Write /incident/notes.md", False, 10, "ok", "/incident/notes.md"
    )
    sandbox_write = ToolFinished(
        "toolu_5", "Write", "Write /workspace/b", False, 10, "ok", "/workspace/b"
    )
    lost = ToolUnknown("toolu_6", "Bash", "Bash: Restart", "systemctl restart app")
    return IncidentRows(
        (SESSION,),
        (
            IncidentRow("input", _at(0), "s1", 1, "message", "pods down", "U0ALICE", ROOT),
            IncidentRow(
                "status", _at(1), "s1", 7, "status", "s1:status:1", None, "1796100001.000200"
            ),
            _event(2, finished),
            IncidentRow(
                "egress", _at(3), "s1", 9, "blocked", "POST api.github.com/repos", "403", "toolu_1"
            ),
            _event(4, mcp),
            _event(5, read),
            _event(6, write),
            _event(7, sandbox_write),
            _event(8, lost),
            _event(9, Notice(NoticeTopic.FILES, "someone changed a file")),
            _event(10, Notice(NoticeTopic.LIMIT, "The session reached its step limit.")),
            _event(11, Answered("**The pool** is exhausted.\n\nDetails…")),
            IncidentRow(
                "event",
                _at(12),
                "s1",
                12,
                "post_done",
                json.dumps({"key": "s1:answer:3", "ts": "1796100009.000900"}),
                None,
                None,
            ),
        ),
    )


def test_each_kind_of_evidence_becomes_one_numbered_entry_and_the_rest_is_left_out() -> None:
    timeline = build_timeline("T1", "C1", _rows(), workspace_url=URL)

    shown = [(e.cite, e.kind, e.summary) for e in timeline.entries]
    assert shown == [
        ("T1", EntryKind.MESSAGE, "pods down"),
        ("T2", EntryKind.COMMAND, "`grep -c 500 app.log` → exit 2"),
        ("T3", EntryKind.EGRESS, "POST api.github.com/repos → 403 (blocked)"),
        ("T4", EntryKind.MCP, 'mcp__grafana__query {"expr": "up"} → ok'),
        ("T5", EntryKind.FILE, "wrote /incident/notes.md"),
        ("T6", EntryKind.COMMAND, "`systemctl restart app` → exit unknown (its worker died)"),
        ("T7", EntryKind.NOTICE, "The session reached its step limit."),
        ("T8", EntryKind.ANSWER, "**The pool** is exhausted. Details…"),
    ]
    assert timeline.get("T5") is timeline.entries[4]
    assert timeline.get("T9") is None


def test_entries_link_to_their_message_the_turns_status_or_the_posted_answer() -> None:
    timeline = build_timeline("T1", "C1", _rows(), workspace_url=URL)
    message, command, *_, answer = timeline.entries

    assert message.permalink == f"{URL}archives/C1/p1796100000000100"
    in_thread = f"?thread_ts={ROOT}&cid=C1"
    assert command.permalink == f"{URL}archives/C1/p1796100001000200{in_thread}"
    assert answer.permalink == f"{URL}archives/C1/p1796100009000900{in_thread}"
    assert message.actor.label == "<@U0ALICE>"
    assert command.actor.label == "agent (<@U0ALICE>'s thread)"


def test_without_a_workspace_url_entries_have_no_links_and_say_so_nowhere() -> None:
    timeline = build_timeline("T1", "C1", _rows(), workspace_url=None)

    assert all(e.permalink is None for e in timeline.entries)
    markdown = timeline_markdown(timeline)
    assert "[↗]" not in markdown
    assert "- **T2** 14:02:02 · agent (<@U0ALICE>'s thread) · command: `grep" in markdown
    assert json.loads(timeline_json(timeline))["entries"][0]["id"] == "T1"
